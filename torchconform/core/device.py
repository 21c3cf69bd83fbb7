"""Device set-up, done before PyTorch's test infrastructure is imported.

``torch.testing._internal.common_device_type`` decides at import time which
device-type test bases exist (PrivateUse1 only if the backend is registered by
then), and reads PYTORCH_TESTING_DEVICE_ONLY_FOR when tests are instantiated.
So the plugin calls :func:`setup_device` from ``pytest_load_initial_conftests``,
before any conftest or test module is imported.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import threading

from torchconform.errors import UserError
from torchconform import settings
from torchconform.core.backend_env import AUTOLOAD_ENV, AUTOLOAD_GROUP, IN_TREE, BringUpError, bring_up


def _bring_up_words(device: str, module: str, exc: BringUpError) -> str:
    """One line in the plugin's flags: what failed bringing ``device`` up, and what to do."""
    if exc.stage == "torch":
        return (f"device {device!r}: importing torch failed: {exc.detail}; torch's autoload runs installed "
                f"backends (entry points {AUTOLOAD_GROUP}): fix that backend or set {AUTOLOAD_ENV}=0")
    if exc.stage == "import":
        return (f"device {device!r}: cannot import backend module {module} ({exc.detail}); install it or pass "
                "--tc-backend-module")
    if exc.stage == "setup":
        return f"device {device!r}: backend set-up failed: {exc.detail}; run `torchconform doctor`"
    if exc.stage == "user":
        return exc.detail
    if exc.stage == "not_registered":
        return (f"device {device!r} is not registered (PrivateUse1 is {exc.detail!r}); pass --tc-backend-module "
                f"naming the module that registers it, or a --tc-profile whose backend_module does")
    if exc.stage == "unavailable":
        return f"device {device!r} is not available in this torch build/machine; pick another --tc-device"
    return f"device {device!r} is registered but reports no devices ({exc.detail}); check the backend's runtime"


def pin_worker(profile) -> None:
    """Under xdist, pin worker gwN to device index N modulo the host's device count (the
    user's TORCHCONFORM_DEVICES_PER_HOST, else counted without starting the device's
    runtime, which would fix the visible devices before the variable is set)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    var = profile.worker_env
    if not var or not worker.startswith("gw") or var in os.environ:
        return
    count = int(settings.get("TORCHCONFORM_DEVICES_PER_HOST") or 0) or _host_device_count(var)
    index = int(worker[2:])
    os.environ[var] = str(index % count if count else index)


def _host_device_count(var: str) -> int:
    """The GPUs the NVIDIA driver lists (one folder each), for CUDA_VISIBLE_DEVICES; 0:
    unknown (another variable, no driver), and then worker N takes index N."""
    if var != "CUDA_VISIBLE_DEVICES":
        return 0
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        pass
    import subprocess

    try:   # a driver without /proc entries (some virtual machines): nvidia-smi lists them
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def worker_threads() -> int:
    """Intra-op threads for an xdist worker: the CPUs shared out between the workers
    (0: not a worker, or the user set OMP_NUM_THREADS).  Every worker otherwise starts
    one thread per CPU, and N workers' thread pools spin against each other."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not os.environ.get("PYTEST_XDIST_WORKER") or count < 2 or "OMP_NUM_THREADS" in os.environ:
        return 0
    return max(1, (os.cpu_count() or 1) // count)


def setup_device(device: str, profile, backend_module: str = "") -> str:
    """Load the backend, check the device really exists, point PyTorch's test
    infrastructure at it.  Returns the device type.  Raises UserError when the
    device is missing: a run must never silently fall back to CPU."""
    for key, value in profile.env.items():
        os.environ.setdefault(key, value)
    pin_worker(profile)
    threads = worker_threads()
    if threads:  # before the backend (and so torch) is imported: OpenMP reads it once
        os.environ["OMP_NUM_THREADS"] = str(threads)
    module = backend_module or profile.backend_module
    # the profile's setup belongs to its own backend_module, not to another one given instead
    setup = profile.setup if profile.setup and (not backend_module or backend_module == profile.backend_module) else ""
    try:
        # torch first: its autoload may register the backend, and importing an autoloaded
        # backend's module before torch re-enters it half-initialised
        bring_up(device, module, setup)
    except BringUpError as exc:
        raise UserError(_bring_up_words(device, module, exc)) from None

    import torch

    if threads and torch.get_num_threads() != threads:  # torch was imported before us
        torch.set_num_threads(threads)
    only_for = device
    if device not in IN_TREE:
        # Lets PrivateUse1 devices run tests PyTorch gates on "custom" devices
        # (read only by torch versions that have the key; harmless otherwise).
        os.environ.setdefault("PYTORCH_TESTING_DEVICE_FOR_CUSTOM", "privateuse1")
    os.environ["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = only_for

    cdt = sys.modules.get("torch.testing._internal.common_device_type")
    if cdt is not None and device not in IN_TREE:
        if not any(getattr(b, "__name__", "") == "PrivateUse1TestBase" for b in cdt.device_type_test_bases):
            raise UserError(
                "PyTorch's test infrastructure was imported before the device was set up, so it generates no "
                f"{device} tests; do not import torch.testing._internal in a conftest loaded before the plugin"
            )
    return device


class BackgroundSetup:
    """``setup_device`` in a thread, for the controller of an xdist run: the controller
    never runs a test, and its workers each set the device up themselves, so its own
    check (importing torch and the backend, seconds) need not delay their start.
    ``wait`` returns the UserError, if any, before any test result is accepted."""

    def __init__(self, device: str, profile, backend_module: str = ""):
        self._error: UserError | None = None
        self._thread = threading.Thread(target=self._run, args=(device, profile, backend_module),
                                        name="torchconform-device-check", daemon=True)
        self._thread.start()

    def _run(self, device, profile, backend_module) -> None:
        try:
            setup_device(device, profile, backend_module)
        except UserError as exc:
            self._error = exc
        except Exception as exc:  # reported like setup_device's own failures
            self._error = UserError(f"device {device!r}: backend set-up failed: {type(exc).__name__}: {exc}; "
                                    "run `torchconform doctor`")

    def wait(self) -> UserError | None:
        self._thread.join()
        return self._error


def torch_versions() -> tuple[str, str]:
    """torch's version and git hash, read without importing torch when it is not loaded
    yet (an xdist controller may still be importing it in BackgroundSetup)."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "__version__"):
        return str(torch.__version__), str(getattr(getattr(torch, "version", None), "git_version", ""))
    spec = importlib.util.find_spec("torch")
    values = {}
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in tree.body:  # torch/version.py is plain assignments of constants
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(target, ast.Name):
                        values[target.id] = node.value.value
    return str(values.get("__version__", "")), str(values.get("git_version", ""))
