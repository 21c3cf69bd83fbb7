"""Every ``TORCHCONFORM_*`` environment variable, declared once (issue 32).

``SETTINGS`` names each variable with its default and what it means; code reads them
through this module only, so a variable cannot be read without being declared here and
docs/settings.md (``python -m torchconform.settings`` writes it) lists them all::

    from torchconform import settings

    settings.get("TORCHCONFORM_SELECTION")        # "quick" when unset
    settings.given("TORCHCONFORM_DEVICE")         # None when unset: the caller's own fallback
    settings.get_int("TORCHCONFORM_REFDEV_DEVICES", 1, 16, what="a device count")

An empty value counts as unset (``TORCHCONFORM_OPS= cmd`` is the shell's way of not setting
it), as every reader did before this table existed.  Writing a variable for a child
process stays ``os.environ[NAME] = ...`` / ``env[NAME] = ...`` with a declared NAME.

Ground floor: imports the standard library and ``torchconform.errors`` only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from torchconform.errors import UserError


@dataclass(frozen=True)
class Setting:
    name: str
    default: str | None      # as the environment would hold it; None: unset
    meaning: str             # one line
    kind: str = "str"        # str, int, float, switch (1/0), path, paths, list, choice, json, url
    flag: str = ""           # the command-line or plugin flag that sets it too, if any
    default_note: str = ""   # what "unset" means where the default is computed, for the docs


def _s(name, default, meaning, kind="str", flag="", note=""):
    return Setting(name, default, meaning, kind, flag, note)


_TABLE = (
    # -- the results store ---------------------------------------------------------
    _s("TORCHCONFORM_DB", "torchconform.db",
       "results store: a SQLite path or an SQLAlchemy URL (the plugin streams outcomes into it "
       "only when it is set or --tc-db is given)", "url", "--db, --tc-db"),
    _s("TORCHCONFORM_DB_URL", None,
       "CI workflows only: the repository secret holding a shared PostgreSQL URL, handed to "
       "the jobs as TORCHCONFORM_DB", "url", note="a file store in the job's folder"),
    _s("TORCHCONFORM_PLAN", None,
       "JSON list of the runs one build plans ([{suite, shards}]); set by `torchconform run` for "
       "its runs so each store sink records the whole plan", "json"),
    # -- the pytest plugin's options (command line, then these, then ini) -----------
    _s("TORCHCONFORM_DEVICE", "cpu",
       "device under test (refdev, neuron, cuda, cpu, any PrivateUse1 name); enables the plugin, "
       "which exports it for the suites; a suite run without it uses cpu", "str", "--device, --tc-device"),
    _s("TORCHCONFORM_PROFILE", None,
       "backend profile name or profile.yaml path; the plugin exports the resolved path",
       "path", "--profile, --tc-profile", "the device's shipped profile"),
    _s("TORCHCONFORM_BACKEND_MODULE", None,
       "module whose import registers the backend", "str", "--backend-module, --tc-backend-module",
       "the profile's backend_module"),
    _s("TORCHCONFORM_BUILD", None, "build name the results belong to", "str", "--build, --tc-build",
       "`<device>-<profile>-<UTC time>`"),
    _s("TORCHCONFORM_JUNIT", None, "write JUnit XML with torchconform properties to this path", "path",
       "--junit, --tc-junit"),
    _s("TORCHCONFORM_JSONL", None, "append outcome records as JSON lines to this path", "path", "--jsonl, --tc-jsonl"),
    _s("TORCHCONFORM_TIMEOUT", "0", "per-test timeout in seconds (0: none); a test past it is a timeout",
       "float", "--timeout, --tc-timeout"),
    _s("TORCHCONFORM_SUITE", None, "suite name recorded with each outcome", "str", "--tc-suite",
       "from the test paths"),
    _s("TORCHCONFORM_SELECTION", "quick", "selection of a torchconform suite (quick, full)", "choice",
       "--selection, --tc-selection"),
    _s("TORCHCONFORM_OPS", None, "comma-separated OpInfo / ModuleInfo names the ops and modules suites "
       "are restricted to", "list", "--ops, --tc-ops", "the whole selection"),
    _s("TORCHCONFORM_SHARD", None, "shard label recorded with the run (e.g. 1/4)", "str", "--shard, --tc-shard"),
    _s("TORCHCONFORM_BRANCH", None, "source branch recorded with the build", "str", "--branch, --tc-branch",
       "GitHub's, else git's"),
    _s("TORCHCONFORM_COMMIT", None, "source commit recorded with the build", "str", "--commit, --tc-commit",
       "GitHub's, else git's"),
    _s("TORCHCONFORM_SAMPLES_ON", "device", "where the ops suite makes its sample inputs: device, or cpu "
       "(copied to the device)", "choice", "--tc-samples-on"),
    _s("TORCHCONFORM_TRAIT_RERUNS", "200", "at most N failures a declared trait may explain are rerun with "
       "the trait off at the end (0: none)", "int", "--trait-reruns, --tc-trait-reruns"),
    _s("TORCHCONFORM_NO_FALLBACK", "0", "1 (true, yes, on): strict mode, a test that ran an operator "
       "through the CPU fallback fails as fallback_forbidden", "switch", "--no-fallback, --tc-no-fallback"),
    _s("TORCHCONFORM_FORK_SERVER", "auto", "on, off or auto: each xdist worker runs its tests in forked "
       "children, so a crash costs a fork (auto: on for refdev and cpu)", "choice", "--tc-fork-server"),
    _s("TORCHCONFORM_MEMORY_LIMIT_MB", "0", "a test may grow its xdist worker's address space by at most N "
       "MiB, past it the test is a crash (0: no limit)", "int", "--memory-limit-mb, --tc-memory-limit-mb"),
    # -- the plugin's internals ----------------------------------------------------
    _s("TORCHCONFORM_STATE_DIR", None, "folder where workers' watchdogs leave timeout markers; the "
       "controller sets it for its workers", "path", note="a new temporary folder"),
    _s("TORCHCONFORM_DISPATCH_WATCH", "1", "the dispatcher observer of CPU fallbacks: 1 where no tracking "
       "API or counter decides, 0 off, always beside the tracking API", "choice"),
    _s("TORCHCONFORM_FORK_RECOVERY_LOG", None, "file the fork server appends one JSON line to per lost "
       "child (its recovery cost; bench/crash_scale.py)", "path"),
    _s("TORCHCONFORM_INFLIGHT", None, "file a serial run keeps its in-flight test's node id in, so "
       "`torchconform run` can record a test that ended the process as a crash", "path"),
    _s("TORCHCONFORM_DEVICES_PER_HOST", "0", "devices per host that xdist workers are pinned across "
       "(0: counted without starting the device runtime)", "int"),
    # -- skiplists -----------------------------------------------------------------
    _s("TORCHCONFORM_SKIPLIST", None, "skiplist files to apply in any pytest run, separated by the "
       "path separator (:)", "paths", "--skiplist, --tc-skiplist"),
    _s("TORCHCONFORM_SKIPLIST_AUDIT", "0", "1: run skip entries as xfail to find stale ones", "switch",
       "--skiplist-audit, --tc-skiplist-audit"),
    _s("TORCHCONFORM_COLLECT_OUT", None, "file the collection plugin writes every collected test to "
       "(one JSON line each); set by skiplists/collect.py for its child", "path"),
    # -- suites --------------------------------------------------------------------
    _s("TORCHCONFORM_PYTORCH_SRC", None, "PyTorch source checkout the upstream suite runs test/FILE.py "
       "from", "path", "--pytorch-src"),
    _s("TORCHCONFORM_UPSTREAM_FILES", None, "comma-separated upstream test files to run", "list", "--files",
       "the upstream selection's files"),
    _s("TORCHCONFORM_UPSTREAM_SELECTION", "default", "selection of suites/upstream/files.yaml to run",
       "str"),
    _s("TORCHCONFORM_UPSTREAM_SPEC", None, "torch-neuronx JSON spec or YAML plan selecting the upstream "
       "tests", "path", "--spec"),
    _s("TORCHCONFORM_WORLD_SIZE", "2", "ranks per test of the distributed suite", "int", "--world-size"),
    _s("TORCHCONFORM_DIST_TIMEOUT", "120", "seconds all ranks of one distributed test get in all",
       "float"),
    _s("TORCHCONFORM_PERF_CALLS", "5", "warm calls per side of each perf suite measurement (1..1000; "
       "bench/perf_suite.py --calls)", "int"),
    _s("TORCHCONFORM_PERF_THREADS", "1", "torch intra-op threads during each perf suite measurement "
       "(1..1024)", "int"),
    _s("TORCHCONFORM_PERF_VARIANTS", "eager,compiled", "perf suite variants to time, comma-separated: "
       "eager, compiled (torch.compile of the same call, first call including the compile; docs/perf.md)",
       "list"),
    # -- refdev --------------------------------------------------------------------
    _s("TORCHCONFORM_REFDEV_NAME", "refdev", "PrivateUse1 name refdev registers (neuron rehearses a "
       "Neuron configuration)", "str"),
    _s("TORCHCONFORM_REFDEV_PROFILE", "young-backend", "refdev's operator profile: a shipped profile name "
       "or a YAML path", "path", "--refdev-profile"),
    _s("TORCHCONFORM_REFDEV_DEVICES", "2", "number of refdev devices (1..16)", "int"),
    _s("TORCHCONFORM_REFDEV_CACHE", None, "refdev's build cache folder", "path",
       note="$XDG_CACHE_HOME/torchconform/refdev (~/.cache/...)"),
    _s("TORCHCONFORM_REFDEV_TRACE", "0", "1: refdev counts every computed operator (refdev.call_counts())",
       "switch"),
    _s("TORCHCONFORM_REFDEV_VERBOSE", "0", "1: show the compiler output of refdev's first build", "switch"),
    # -- the dashboard -------------------------------------------------------------
    _s("TORCHCONFORM_SITE_WORKERS", None, "processes rendering the site's per-build pages (1: in this "
       "process)", "int", note="up to 4 for stores of 100,000 results or more, else 1"),
    # -- this repository's own tests -----------------------------------------------
    _s("TORCHCONFORM_NIGHTLY", "0", "tests only: 1 runs the nightly-scale tests (pytest marker nightly)",
       "switch"),
    _s("TORCHCONFORM_ARTIFACTS", None, "tests only: folder the browser test leaves its screenshots in",
       "path", note="the test's temporary folder"),
    _s("TORCHCONFORM_CHROMIUM", None, "tests only: the chromium binary the browser test drives", "path",
       note="chromium on PATH, else /usr/bin/chromium"),
)

SETTINGS: dict[str, Setting] = {s.name: s for s in _TABLE}


def setting(name: str) -> Setting:
    try:
        return SETTINGS[name]
    except KeyError:
        raise KeyError(f"{name} is not declared in torchconform.settings.SETTINGS; "
                       "declare it there (name, default, meaning) before reading it") from None


def default(name: str) -> str | None:
    """The declared default of ``name`` (None: unset)."""
    return setting(name).default


def given(name: str, environ=None) -> str | None:
    """The value the environment gives ``name``; None when unset or empty (the caller
    decides what that means, e.g. a command-line value or ini key comes next)."""
    setting(name)
    value = (os.environ if environ is None else environ).get(name)
    return value if value else None


def get(name: str, environ=None) -> str | None:
    """The environment's value of ``name``, else its declared default."""
    value = given(name, environ)
    return value if value is not None else SETTINGS[name].default


def is_on(name: str, environ=None) -> bool:
    """A 1/0 switch: on exactly when the value is ``1``."""
    return get(name, environ) == "1"


def get_int(name: str, smallest: int | None = None, largest: int | None = None, *,
            what: str = "a whole number", fix: str = "", environ=None) -> int:
    """``get(name)`` as an int within [smallest, largest]; else a UserError:
    ``NAME='raw' is not <what>; <fix>`` (fix: the range and the default)."""
    raw = get(name, environ)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or (smallest is not None and value < smallest) or (largest is not None and value > largest):
        raise UserError(f"{name}={raw!r} is not {what}; {fix or _fix(name, 'a whole number', smallest, largest)}")
    return value


def get_float(name: str, smallest: float | None = None, *, what: str = "a number", fix: str = "",
              environ=None) -> float:
    """``get(name)`` as a float of at least ``smallest``; else a UserError like get_int's."""
    raw = get(name, environ)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or value != value or (smallest is not None and value < smallest):
        raise UserError(f"{name}={raw!r} is not {what}; {fix or _fix(name, 'a number', smallest, None)}")
    return value


def _fix(name: str, noun: str, smallest, largest) -> str:
    if smallest is not None and largest is not None:
        words = f"set it to {noun} from {smallest} to {largest}"
    elif smallest is not None:
        words = f"set it to {noun} of at least {smallest}"
    else:
        words = f"set it to {noun}"
    declared = SETTINGS[name].default
    return words + (f" (default {declared})" if declared is not None else "")


def describe() -> list[tuple[str, str, str, str]]:
    """(name, default, flag, meaning) of every setting, in the table's order, for docs."""
    rows = []
    for s in _TABLE:
        if s.default is None:
            shown = f"unset: {s.default_note}" if s.default_note else "unset"
        else:
            shown = f"`{s.default}`"
        rows.append((s.name, shown, s.flag, s.meaning))
    return rows


def markdown() -> str:
    """The table of docs/settings.md."""
    lines = ["| variable | default | flag | meaning |", "|---|---|---|---|"]
    for name, shown, flag, meaning in describe():
        cell = ", ".join(f"`{f.strip()}`" if f.strip().startswith("--") else f.strip()
                         for f in flag.split(",")) if flag else ""
        lines.append(f"| `{name}` | {shown} | {cell} | {meaning.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
