"""The environment a run really had: OS, kernel, CPU model and count, NUMA nodes, the
CPU affinity and memory binding of this process, the launch command, torch / Python /
backend module versions.  Read from the OS (/proc, /sys, platform) and installed
metadata: no device is touched, so the controller records it on every build (the run
metadata's ``environment``) and the traits suite reports it as a trait note.
"""
from __future__ import annotations

import glob
import os
import platform
import sys
from torchconform.config import mask_password
from torchconform.core.backend_env import IN_TREE, autoload_enabled, autoload_entry_points, distribution_of


def _ranges(numbers) -> str:
    """``0-3,6`` for {0, 1, 2, 3, 6}."""
    numbers, out = sorted(numbers), []
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in out)


def _proc_value(path: str, prefix: str) -> str:
    """The value after ':' on the first line of ``path`` starting with ``prefix`` (case
    ignored); "" where the file is unreadable (not Linux) or has no such line."""
    try:
        with open(path, encoding="utf-8") as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.lower().startswith(prefix.lower())), "")
    except OSError:
        return ""


def _status_field(name: str) -> str:
    return _proc_value("/proc/self/status", name + ":")


def _cpu_model() -> str:
    return _proc_value("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()


def _memory_policy() -> str:
    """The process's NUMA memory policy as numa_maps shows it on its first mapping
    (``default``, ``bind:0``, ``interleave:0-1``...); "" where Linux does not say."""
    try:
        with open("/proc/self/numa_maps", encoding="utf-8") as f:
            first = f.readline().split()
        return first[1] if len(first) > 1 else ""
    except OSError:
        return ""


def _launch_command() -> str:
    """The outermost ancestor (within 8) whose command line names torchconform: the
    command the user ran (pytest and xdist workers sit below it); else this process."""
    found, pid = " ".join(sys.argv), os.getpid()
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if any("torchconform" in a for a in argv) and "pytest" not in " ".join(argv[:3]):
            found = " ".join(_short_program(argv))
        if pid <= 1:
            break
    return mask_password(found)


def _short_program(argv: list[str]) -> list[str]:
    """The interpreter and a console script by their names (``python -m torchconform run ...``,
    ``python torchconform run ...``): the venv's path is long, and the host note that carries
    the launch line has a length limit (torchconform/core/traitnotes.py cuts the longest evidence
    from its end), so the arguments, which say what ran, come first."""
    argv = list(argv)
    if argv and os.path.basename(argv[0]).startswith("python"):
        argv[0] = os.path.basename(argv[0])
        if len(argv) > 1 and os.path.basename(argv[1]) == "torchconform":
            argv[1] = "torchconform"
    return argv


def _backend_version(module: str, device: str = "") -> str:
    """``<module> <version>`` of the backend, the version from its installed distribution
    (named too when its name is not the module's); with no module, the module of torch's
    autoload entry point that registers ``device``; "" when there is neither."""
    module = module or _autoload_module(device)
    if not module:
        return ""
    dist, version = distribution_of(module)
    if not version:  # not an installed distribution: ask the module
        version = str(getattr(sys.modules.get(module) or sys.modules.get(module.split(".")[0]), "__version__", "")
                      or "unknown")
    same = dist.lower().replace("-", "_") == module.split(".")[0].lower()
    return f"{module} {version}" + (f" ({dist})" if dist and not same else "")


def _autoload_module(device: str) -> str:
    """The module of the autoload entry point (group ``torch.backends``) behind ``device``:
    the one named like the device, else the only one whose module is loaded; "" if unsure."""
    if not device or device in IN_TREE or not autoload_enabled():
        return ""
    entries = [(e["name"], e["value"].partition(":")[0]) for e in autoload_entry_points()]
    named = [m for name, m in entries if name == device]
    loaded = [m for _, m in entries if m in sys.modules]
    return (named or (loaded if len(loaded) == 1 else [""]))[0]


def measure(device: str, backend_module: str = "") -> tuple[dict, dict]:
    """(values, evidence): what the seed says every result must be reported with, and
    what they were read from."""
    import torch

    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    values = {
        "os": f"{platform.system()} {platform.release()}",
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "numa_nodes": len(glob.glob("/sys/devices/system/node/node[0-9]*")) or None,
        "cpu_affinity": _ranges(affinity) if affinity else None,
        "mems_allowed": _status_field("Mems_allowed_list") or None,
        "memory_policy": _memory_policy() or None,
        "torch": torch.__version__,
        "backend": _backend_version(backend_module, device) or None,
        "device": device,
        "python": platform.python_version(),
    }
    if torch.version.cuda and device == "cuda":
        values["cuda_runtime"] = torch.version.cuda
    return values, {"kernel": platform.version(), "torch_git": (torch.version.git_version or "")[:12],
                    "launch": _launch_command()}
