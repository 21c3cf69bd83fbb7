"""Compile (once) and import torchconform's C++ extensions: refdev's core, and the
census's operator recorder (census/csrc/opset.cpp).

The extension is built with ``torch.utils.cpp_extension.load`` on first use,
never at install time: an isolated pip build environment would link against a
different torch.  Builds are cached under a user cache directory, one folder
per (torch version, torch git hash, source hash, compiler), so a build made for
another torch can never be loaded.  A cross-process file lock makes concurrent
first loads (pytest-xdist workers) build once and wait for each other.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys

from torchconform import settings as tc_settings
from torchconform.errors import UserError

HERE = os.path.dirname(os.path.abspath(__file__))


def _csrc(*parts: str) -> str:
    return os.path.join(HERE, "csrc", *parts)


# refdev's core, split like PyTorch's OpenReg backend: csrc/runtime (the device) and
# csrc/aten (the operators); module.cpp holds only the Python module.  cpp_extension names
# each object file after its source's basename, so basenames must be unique.
SOURCES = [
    _csrc("module.cpp"),
    _csrc("runtime", "state.cpp"),
    _csrc("runtime", "allocator.cpp"),
    _csrc("runtime", "guard.cpp"),
    _csrc("runtime", "generator.cpp"),
    _csrc("runtime", "hooks.cpp"),
    _csrc("aten", "device_tensor.cpp"),
    _csrc("aten", "storage_kernels.cpp"),
    _csrc("aten", "autocast.cpp"),
    _csrc("aten", "compute.cpp"),
    _csrc("aten", "control.cpp"),
    _csrc("boxed_fallback.cpp"),
]
_STATE, _ALLOC, _GEN, _HOOKS = (_csrc("runtime", h) for h in ("state.h", "allocator.h", "generator.h", "hooks.h"))
_TENSOR, _COMPUTE, _CONTROL = (_csrc("aten", h) for h in ("device_tensor.h", "compute.h", "control.h"))
# Headers each source includes: part of the build key, so an edit rebuilds.
HEADERS = {
    _csrc("module.cpp"): [_COMPUTE, _CONTROL, _TENSOR, _csrc("boxed_fallback.h"), _GEN, _STATE],
    _csrc("runtime", "state.cpp"): [_STATE],
    _csrc("runtime", "allocator.cpp"): [_ALLOC, _STATE],
    _csrc("runtime", "guard.cpp"): [_STATE],
    _csrc("runtime", "generator.cpp"): [_GEN, _STATE],
    _csrc("runtime", "hooks.cpp"): [_HOOKS, _GEN, _STATE],
    _csrc("aten", "device_tensor.cpp"): [_TENSOR, _ALLOC, _STATE],
    _csrc("aten", "storage_kernels.cpp"): [_TENSOR, _ALLOC, _STATE],
    _csrc("aten", "compute.cpp"): [_COMPUTE, _TENSOR, _ALLOC, _GEN, _STATE],
    _csrc("aten", "control.cpp"): [_CONTROL, _COMPUTE, _TENSOR, _HOOKS, _STATE],
    _csrc("boxed_fallback.cpp"): [_csrc("boxed_fallback.h")],
}
CACHE_ENV = "TORCHCONFORM_REFDEV_CACHE"
DONE = "built.ok"


def cache_root() -> str:
    """$TORCHCONFORM_REFDEV_CACHE, else $XDG_CACHE_HOME/torchconform/refdev (~/.cache/...)."""
    if tc_settings.given(CACHE_ENV):
        return os.path.abspath(os.path.expanduser(tc_settings.given(CACHE_ENV)))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torchconform", "refdev")


def find_compiler() -> str | None:
    """Path of the C++ compiler cpp_extension will use ($CXX, else c++), or None."""
    return shutil.which(os.environ.get("CXX", "c++"))


def ninja_on_path() -> str | None:
    """Put the ``ninja`` package's binary folder on PATH; return the ninja found, if any."""
    try:
        import ninja

        bin_dir = ninja.BIN_DIR
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    except ImportError:
        pass  # no ninja wheel: torch builds with the ninja on PATH, or says it is missing
    return shutil.which("ninja")


def build_key(compiler: str, sources=SOURCES) -> str:
    import torch

    h = hashlib.sha256()
    # Each file once (many sources share a header), sources first, then headers in first-seen order.
    for path in dict.fromkeys(list(sources) + [hdr for src in sources for hdr in HEADERS.get(src, [])]):
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(torch.__version__.encode())
    h.update(str(getattr(torch.version, "git_version", "")).encode())
    h.update(os.path.realpath(compiler).encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


# Extensions imported by this process, by module name: describe() of a boxed profile may
# import refdev's before load() does, and a second import of one .so must not run its
# module initialisation again.
_IMPORTED: dict = {}


def _import_so(name: str, path: str):
    if name not in _IMPORTED:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _IMPORTED[name] = module
    return _IMPORTED[name]


def _find_so(build_dir: str, name: str) -> str | None:
    for entry in os.listdir(build_dir):
        if entry.startswith(name) and entry.endswith(".so"):
            return os.path.join(build_dir, entry)
    return None


def load_extension(verbose: bool = False, sources=SOURCES, stem: str = "refdev", what: str = "the refdev device"):
    """Return the compiled extension of ``sources`` (by default refdev's core), building
    it if needed; ``what`` names it in messages.  refdev's builds live in the cache
    root's ``<key>`` folders, any other stem's in ``<stem>-<key>``."""
    import torch  # libtorch symbols must be loaded first

    compiler = find_compiler()
    if compiler is None:
        raise UserError(
            f"no C++ compiler found (looked for {os.environ.get('CXX', 'c++')!r}) to build {what}; "
            "install one (apt-get install g++) or point $CXX at it"
        )
    key = build_key(compiler, sources)
    name = f"torchconform_{stem}_{key}"
    if name in _IMPORTED:
        return _IMPORTED[name]
    build_dir = os.path.join(cache_root(), key if stem == "refdev" else f"{stem}-{key}")
    done = os.path.join(build_dir, DONE)
    if os.path.exists(done):
        so = _find_so(build_dir, name)
        if so:
            return _import_so(name, so)
    if ninja_on_path() is None:
        raise UserError(f"ninja not found to build {what}; install it (pip install ninja)")
    os.makedirs(build_dir, exist_ok=True)
    # flock (not only cpp_extension's FileBaton): released by the kernel if a
    # builder dies, so a crashed build never leaves the others waiting forever.
    with open(os.path.join(build_dir, "build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not os.path.exists(done):
                from torch.utils import cpp_extension

                # Holding the flock, nobody else is building here: a FileBaton
                # left by a killed build would make cpp_extension wait forever.
                stale = os.path.join(build_dir, "lock")
                if os.path.exists(stale):
                    os.remove(stale)

                # Silent otherwise for half a minute (33 s on an idle machine, 93 s on two busy cores).
                print(f"torchconform: compiling {what} for torch {torch.__version__} (once per torch "
                      f"and compiler; 30 s to 2 minutes) into {build_dir}", file=sys.stderr, flush=True)
                try:
                    module = cpp_extension.load(
                        name=name,
                        sources=list(sources),
                        build_directory=build_dir,
                        extra_cflags=["-O2"],
                        verbose=verbose,
                    )
                except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
                    # The compiler's output is pages long; the one line says where and how to see it.
                    raise UserError(
                        f"building {what} in {build_dir} failed ({type(exc).__name__}); check that "
                        f"{compiler} can build PyTorch extensions (g++ and Python headers) and rerun with "
                        "TORCHCONFORM_REFDEV_VERBOSE=1 to see the compiler output"
                    ) from exc
                with open(done + ".tmp", "w") as f:
                    f.write(key + "\n")
                os.replace(done + ".tmp", done)
                _IMPORTED[name] = module
                return module
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    so = _find_so(build_dir, name)
    if so is None:
        raise UserError(f"the build cache {build_dir} of {what} is incomplete; delete that folder and rerun")
    return _import_so(name, so)


_OPTIONAL: dict = {}


def optional_extension(source: str, stem: str, what: str):
    """An extension the caller can do without (an observer, a recorder): built and loaded
    once per process like ``load_extension``; None where it cannot be built (no compiler,
    no ninja), which the caller says or works around."""
    if stem not in _OPTIONAL:
        try:
            _OPTIONAL[stem] = load_extension(sources=[source], stem=stem, what=what)
        except UserError:
            _OPTIONAL[stem] = None
    return _OPTIONAL[stem]

