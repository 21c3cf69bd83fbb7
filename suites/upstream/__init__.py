"""The upstream suite: PyTorch's own test files, from a source checkout, on the device.

``torchconform run --suite upstream --pytorch-src PATH [--files test_ops,test_nn]``
(or ``$TORCHCONFORM_PYTORCH_SRC``) runs ``PATH/test/<file>.py`` through pytest with
the torchconform plugin, so outcomes are classified exactly as in the ops suite.

The runner calls :func:`pytest_args`; everything upstream-specific lives here:
which files (``files.yaml``), the checkout/torch version check, and the pytest
settings that keep the checkout's own CI configuration out of the way.
"""
from __future__ import annotations

import os
import subprocess
import sys

from torchconform.errors import UserError
from torchconform import settings
from torchconform.core.yamlpos import load_data

SRC_ENV = "TORCHCONFORM_PYTORCH_SRC"
FILES_ENV = "TORCHCONFORM_UPSTREAM_FILES"          # comma-separated, like --files
SELECTION_ENV = "TORCHCONFORM_UPSTREAM_SELECTION"  # a selection of files.yaml (default: default)
SPEC_ENV = "TORCHCONFORM_UPSTREAM_SPEC"            # a torch-neuronx spec selecting the tests (spec_select.py)
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "files.yaml")
INI = os.path.join(HERE, "pytest.ini")
PLUGIN = "torchconform.suites.upstream.plugin"


def load_config(path: str = DATA) -> dict:
    return load_data(path) or {}


def resolve_src(src: str | None) -> str:
    """The checkout: ``--pytorch-src``, else ``$TORCHCONFORM_PYTORCH_SRC``; must hold ``test/``."""
    src = src or settings.given(SRC_ENV)
    if not src:
        raise UserError(f"the upstream suite needs a PyTorch source checkout; pass --pytorch-src PATH or set {SRC_ENV}")
    src = os.path.abspath(os.path.expanduser(src))
    if not os.path.isdir(os.path.join(src, "test")):
        raise UserError(f"{src} has no test/ folder, so it is not a PyTorch source checkout; point --pytorch-src at the repository root")
    return src


def select_files(src: str, files=None, selection: str | None = None, config: dict | None = None) -> list[str]:
    """Absolute paths of the test files to run.

    ``files``: names (``test_ops``), file names (``test_ops.py``) or paths relative to
    the checkout (``test/test_ops.py``), as a list or a comma-separated string.
    Without ``files``, the named selection of ``files.yaml`` (default ``default``).
    """
    config = config if config is not None else load_config()
    if isinstance(files, str):
        files = [f for f in files.split(",") if f.strip()]
    if not files:
        selections = config.get("selections", {})
        name = selection or "default"
        if name not in selections:
            raise UserError(f"unknown upstream selection {name!r}; choose one of {', '.join(selections)} or pass --files")
        files = selections[name]
    out = []
    for name in files:
        name = name.strip()
        candidates = [os.path.join(src, name), os.path.join(src, "test", name),
                      os.path.join(src, "test", name + ".py")]
        path = next((c for c in candidates if os.path.isfile(c) and c.endswith(".py")), None)
        if path is None:
            raise UserError(f"no test file {name!r} in {os.path.join(src, 'test')}; check --files against the checkout")
        if path not in out:
            out.append(os.path.abspath(path))
    return out


# -- does the checkout match the installed torch? ----------------------------

def checkout_commit(src: str) -> str | None:
    """HEAD commit of the checkout, or None when it is not a git checkout."""
    try:
        proc = subprocess.run(["git", "-C", src, "rev-parse", "--show-toplevel", "HEAD"],
                              capture_output=True, text=True, timeout=30)
        lines = proc.stdout.split()
        if proc.returncode == 0 and len(lines) == 2:
            # A folder inside some other repository is not a checkout of its own.
            if os.path.realpath(lines[0]) != os.path.realpath(src):
                return None
            return lines[1]
    except (OSError, subprocess.SubprocessError):
        pass  # not a git checkout, or no git: try reading .git directly below
    # No git binary (or a bare copy of .git): read HEAD ourselves.
    head = os.path.join(src, ".git", "HEAD")
    try:
        with open(head, encoding="utf-8") as fh:
            ref = fh.read().strip()
    except OSError:
        return None
    if not ref.startswith("ref:"):
        return ref or None
    ref = ref[4:].strip()
    try:
        with open(os.path.join(src, ".git", ref), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        pass  # a packed ref: look in packed-refs below
    try:
        with open(os.path.join(src, ".git", "packed-refs"), encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        pass  # no packed-refs either: the revision stays unknown
    return None


def checkout_branch(src: str) -> str:
    """The branch checked out in ``src`` ("" for a detached HEAD or no checkout)."""
    if checkout_commit(src) is None:
        return ""  # not a checkout of its own (perhaps a folder of another repository)
    try:
        with open(os.path.join(src, ".git", "HEAD"), encoding="utf-8") as fh:
            ref = fh.read().strip()
    except OSError:
        return ""
    return ref[len("ref: refs/heads/"):] if ref.startswith("ref: refs/heads/") else ""


def checkout_version(src: str) -> str | None:
    try:
        with open(os.path.join(src, "version.txt"), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def check_checkout(src: str, git_version: str | None = None, torch_version: str | None = None) -> str | None:
    """A warning when the checkout is not the source of the installed torch, else None.

    Upstream test files track torch's internals (OpInfo databases, helpers in
    torch.testing._internal come from the wheel): a mismatch shows up as import
    errors or bogus failures, so the user must hear about it before the run.
    """
    import torch

    git_version = git_version or getattr(torch.version, "git_version", "") or ""
    torch_version = torch_version or torch.__version__
    head = checkout_commit(src)
    if head and git_version and git_version != "Unknown":
        if head == git_version:
            return None
        version = checkout_version(src)
        at = f" ({version})" if version else ""
        return (f"PyTorch checkout {src} is at commit {head[:12]}{at}, but the installed torch {torch_version} "
                f"was built from {git_version[:12]}; its test files may not match this torch: "
                f"run `git -C {src} checkout {git_version}`")
    version = checkout_version(src)
    base = torch_version.split("+")[0]
    if version and version.split("a")[0].split("+")[0] != base:
        return (f"PyTorch checkout {src} is version {version}, the installed torch is {torch_version}; "
                f"its test files may not match this torch: check out the source of commit {git_version[:12] or 'unknown'}")
    if head is None:
        return (f"cannot tell which commit {src} is (not a git checkout); make sure it is the source of torch "
                f"{torch_version} (commit {git_version[:12] or 'unknown'})")
    return None


def warn(message: str) -> None:
    print(f"torchconform: warning: {message}", file=sys.stderr)


def pytest_args(src: str | None = None, files=None, selection: str | None = None,
                check_version: bool = True, config: dict | None = None, spec: str | None = None) -> list[str]:
    """pytest arguments that run the upstream files (add the runner's ``--tc-*`` options).

    This is the one call the runner's ``run --suite upstream`` needs.  ``spec``: a
    torch-neuronx spec (or an imported skiplist of one) selects the files and tests and
    brings its expectations (suites/upstream/spec_select.py).
    """
    config = config if config is not None else load_config()
    src = resolve_src(src)
    extra: list[str] = []
    if spec:
        # only a --spec run needs the spec's reader (it loads pytest and the spec's schema)
        from torchconform.suites.upstream.spec_select import load_plan, spec_files

        if files:
            raise UserError("--spec selects the files itself; drop --files")
        paths = spec_files(load_plan(spec), src)
        os.environ[SPEC_ENV] = os.path.abspath(spec)   # read by the selection plugin in pytest
        extra = ["-p", "torchconform.suites.upstream.spec_select", "--tc-skiplist", os.path.abspath(spec)]
    else:
        paths = select_files(src, files, selection, config)
    if check_version:
        message = check_checkout(src)
        if message:
            warn(message)
    args = ["-c", INI, "--rootdir", src, "-p", PLUGIN, "-p", "torchconform.collectors.skiplist_plugin"]
    if (config.get("pytest") or {}).get("noconftest", True):
        args.append("--noconftest")
    return args + extra + paths


def suite_args() -> list[str]:
    """What ``torchconform run --suite upstream`` passes to pytest instead of test paths:
    the checkout and files come from ``$TORCHCONFORM_PYTORCH_SRC`` and
    ``$TORCHCONFORM_UPSTREAM_FILES`` (set by ``--pytorch-src`` / ``--files``)."""
    return pytest_args(settings.given(SRC_ENV), settings.given(FILES_ENV),
                       settings.given(SELECTION_ENV), spec=settings.given(SPEC_ENV))


def __getattr__(name):
    # ``torchconform run`` reads ``TEST_PATHS`` of a suite module and puts it on the
    # pytest command line; for upstream that list depends on the checkout, so it is
    # computed when asked for (PEP 562), and a missing checkout is a one-line UserError.
    if name == "TEST_PATHS":
        return suite_args()
    raise AttributeError(name)
