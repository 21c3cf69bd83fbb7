"""Entry point: discover ``cmd_*`` modules, parse, dispatch, turn UserError into one line."""
import argparse
import importlib
import os
import pkgutil
import signal
import sys

from torchconform import __version__
from torchconform.config import mask_password
from torchconform.errors import UserError
import torchconform.cli as package

PROG = "torchconform"


def _command_modules():
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("cmd_"):
            yield importlib.import_module(f"{package.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Conformance and CI test suites for PyTorch device backends.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _command_modules():
        module.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a reader gone by now (`| head`) is found here, not at interpreter exit
    except BrokenPipeError:
        # The reader stopped reading: end quietly with the status of a SIGPIPE death, as Unix
        # tools do; stdout goes to /dev/null so that the interpreter's final flush is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except UserError as exc:
        print(f"{PROG}: error: {mask_password(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
