"""Skiplist entries: what a backend team knows is broken, and which tests it covers.

An entry matches tests in one of three ways:

* ``test``: a shell-style glob on the pytest node id
  (``*TestCommonREFDEV::test_compare_cpu_sort_*``);
* ``regex``: a Python regular expression searched in the node id;
* ``op`` (+ optional ``variant``, ``dtype``, ``kind``): the OpInfo / ModuleInfo name,
  the OpInfo variant (``variant_test_name``; ``""`` = the default variant only),
  the dtype(s), and the test kind (the generic test's name, e.g. ``test_compare_cpu``).
  ``op`` and ``kind`` accept globs.

Matching works on a ``TestInfo``, built either from a live pytest item (at
collection) or from a stored ``Outcome`` (for lint, propose and prune), so the
same entry means the same tests in both places.
"""
from __future__ import annotations

import datetime as _dt
import fnmatch
import inspect
import os
import re
from dataclasses import dataclass, field

MODES = ("skip", "xfail")
CATEGORIES = ("known_bug", "unsupported_feature", "flaky", "too_slow", "crashes_device")

# Skips created from an entry carry this prefix so that the classifier (and a
# JUnit reader) can tell them from PyTorch's own skips.
# The classifier (torchconform/core/classify.py) reads the first word after this prefix
# as the entry reference, so the format is "<prefix> <ref>: <reason> (<issue>)".
SKIP_PREFIX = "torchconform skiplist:"


@dataclass(frozen=True)
class TestInfo:
    """What an entry can match on, for one test."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    test_id: str
    cls: str = ""
    name: str = ""
    op: str = ""          # OpInfo / ModuleInfo name, e.g. "div" or "nn.Linear"
    op_variant: str = ""  # OpInfo variant_test_name, e.g. "floor_rounding"
    dtype: str = ""       # "float32"; "" when the test has no dtype
    kind: str = ""        # generic test name, e.g. "test_compare_cpu"


@dataclass
class Entry:
    mode: str
    category: str
    reason: str
    issue: str
    added: _dt.date
    id: str = ""
    test: str | None = None
    regex: str | None = None
    op: str | None = None
    variant: str | None = None
    dtypes: tuple[str, ...] = ()
    kind: str | None = None
    expires: _dt.date | None = None
    torch: str | None = None     # PEP 440 specifier set, e.g. ">=2.12,<2.14"
    path: str = ""
    line: int = 0
    _compiled: re.Pattern | None = field(default=None, repr=False, compare=False)

    # -- identity ---------------------------------------------------------
    @property
    def ref(self) -> str:
        """Stable name stored with outcomes: ``<file>::<id>``."""
        return f"{skiplist_name(self.path)}::{self.id}"

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def match_key(self) -> tuple:
        """Two entries with the same key select exactly the same tests."""
        return (self.test, self.regex, self.op, self.variant, tuple(sorted(self.dtypes)), self.kind)

    def describe_match(self) -> str:
        if self.test is not None:
            return f"test {self.test}"
        if self.regex is not None:
            return f"regex {self.regex}"
        parts = [f"op {self.op}"]
        if self.variant is not None:
            parts.append(f"variant {self.variant or '(default)'}")
        if self.dtypes:
            parts.append("dtype " + ",".join(self.dtypes))
        if self.kind:
            parts.append(f"kind {self.kind}")
        return " ".join(parts)

    # -- activity ---------------------------------------------------------
    def expired(self, today: _dt.date | None = None) -> bool:
        return self.expires is not None and self.expires < (today or _dt.date.today())

    def applies_to_torch(self, version: str | None = None) -> bool:
        if not self.torch:
            return True
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        if version is None:
            import torch

            version = torch.__version__
        # Local build tags (+cpu, +cu124) say nothing about the API level.
        base = Version(str(version).split("+")[0])
        return SpecifierSet(self.torch).contains(base, prereleases=True)

    def active(self, today: _dt.date | None = None, torch_version: str | None = None) -> bool:
        """Expired entries stop applying: the failure shows again, which is the point."""
        return not self.expired(today) and self.applies_to_torch(torch_version)

    # -- matching ---------------------------------------------------------
    def matches(self, info: TestInfo) -> bool:
        if self.test is not None:
            return fnmatch.fnmatchcase(info.test_id, self.test)
        if self.regex is not None:
            if self._compiled is None:
                self._compiled = re.compile(self.regex)
            return self._compiled.search(info.test_id) is not None
        if not info.op:
            return False
        # Stored outcomes may carry the OpInfo full name ("div.floor_rounding") in
        # ``op`` with no separate variant, live items carry both parts: compare full names.
        full = f"{info.op}.{info.op_variant}" if info.op_variant else info.op
        if self.variant is not None:
            target = f"{self.op}.{self.variant}" if self.variant else self.op
            if not fnmatch.fnmatchcase(full, target):
                return False
        elif not (fnmatch.fnmatchcase(full, self.op) or fnmatch.fnmatchcase(full, self.op + ".*")
                  # ModuleInfo tests are recorded by formatted name (nn_Linear for nn.Linear),
                  # live items by name: either spelling matches either.
                  or fnmatch.fnmatchcase(full.replace(".", "_"), self.op.replace(".", "_"))):
            return False
        if self.dtypes and info.dtype not in self.dtypes:
            return False
        if self.kind and not fnmatch.fnmatchcase(info.kind, self.kind):
            return False
        return True

    def skip_reason(self) -> str:
        return f"{SKIP_PREFIX} {self.ref}: {self.reason} ({self.issue})"


def skiplist_name(path: str) -> str:
    """``refdev/young-backend.yaml`` for files under a ``skiplists`` folder, else the file name."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if "skiplists" in parts:
        idx = len(parts) - 1 - parts[::-1].index("skiplists")
        return "/".join(parts[idx + 1:])
    return parts[-1]


def first_match(entries, info: TestInfo, today=None, torch_version=None) -> Entry | None:
    """The first active entry (file order) that matches ``info``."""
    for entry in entries:
        if entry.active(today, torch_version) and entry.matches(info):
            return entry
    return None


_ENTRY_REF = re.compile(re.escape(SKIP_PREFIX) + r"\s*(?P<ref>\S+::[^\s:]+)")


def ref_from_message(text: str) -> str:
    """The entry reference inside a skip reason written by ``Entry.skip_reason``."""
    m = _ENTRY_REF.search(text or "")
    return m.group("ref") if m else ""


# -- building TestInfo ------------------------------------------------------

def _dtype_name(dtype) -> str:
    if dtype is None:
        return ""
    text = str(dtype)
    return text[len("torch."):] if text.startswith("torch.") else text


def _param_kwargs(fn) -> dict:
    """PyTorch's instantiated tests keep their parameters as a default argument."""
    seen = 0
    while fn is not None and seen < 20:
        try:
            params = inspect.signature(fn, follow_wrapped=False).parameters
        except (TypeError, ValueError):
            params = {}
        p = params.get("param_kwargs") if params else None
        if p is not None and isinstance(p.default, dict):
            return p.default
        fn = getattr(fn, "__wrapped__", None)
        seen += 1
    return {}


def info_from_item(item) -> TestInfo:
    """TestInfo for a collected pytest item (PyTorch device-generic tests or plain ones)."""
    cls = getattr(getattr(item, "cls", None), "__name__", "") or ""
    fn = getattr(item, "obj", None)
    fn = getattr(fn, "__func__", fn)
    kwargs = _param_kwargs(fn) if fn is not None else {}
    op = kwargs.get("op")
    module_info = kwargs.get("module_info")
    op_name, op_variant = "", ""
    if op is not None:
        op_name, op_variant = getattr(op, "name", ""), getattr(op, "variant_test_name", "") or ""
    elif module_info is not None:
        op_name = getattr(module_info, "name", "")
    dtype = kwargs.get("dtype", kwargs.get("dtypes"))
    if isinstance(dtype, (list, tuple)):
        dtype = "_".join(_dtype_name(d) for d in dtype)
    kind = getattr(fn, "__name__", "") if kwargs or op is not None else ""
    if not kind or kind == "instantiated_test":
        kind = derive_kind(item.name, op_name, op_variant)
    return TestInfo(test_id=item.nodeid, cls=cls, name=item.name, op=op_name,
                    op_variant=op_variant, dtype=_dtype_name(dtype), kind=kind)


def derive_kind(name: str, op: str, op_variant: str = "") -> str:
    """Generic test name from an instantiated one: ``test_compare_cpu_add_refdev_float32`` -> ``test_compare_cpu``."""
    if op:
        formatted = op.replace(".", "_") + ("_" + op_variant.replace(".", "_") if op_variant else "")
        idx = name.find("_" + formatted + "_")
        if idx > 0:
            return name[:idx]
    return name


def info_from_outcome(outcome) -> TestInfo:
    """TestInfo for a stored outcome record (``torchconform.core.outcome.Outcome``).

    ``op`` is kept as stored (base or full OpInfo name); ``Entry.matches`` compares
    full names, so both forms match the same entries.
    """
    op = outcome.op or ""
    return info_from_record(outcome.test_id, outcome.cls or "", outcome.name or "", op,
                            getattr(outcome, "variant", "") or "", outcome.dtype or "")


def info_from_record(test_id: str, cls: str, name: str, op: str, variant: str, dtype: str) -> TestInfo:
    """TestInfo from the runner's fields, where ``variant`` is the test kind without
    its ``test_`` prefix (``compare_cpu``) and ``op`` the OpInfo full name."""
    kind = derive_kind(name, op)
    if kind == name and variant:
        kind = "test_" + variant
    return TestInfo(test_id=test_id, cls=cls, name=name, op=op, op_variant="", dtype=dtype, kind=kind)


@dataclass
class Skiplist:
    """A skiplist file: where it is, the backend it was written for, and its entries."""
    path: str
    backend: str = ""
    description: str = ""
    entries: list[Entry] = field(default_factory=list)
