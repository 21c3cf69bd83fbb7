"""The backend's own operator tracking, where its profile names it (``tracking:``).

torch_neuronx keeps two sets of operator names, those run through its CPU fallback
and those its device executed, until cleared (``get_fallback_ops()``,
``get_executed_ops()``, ``clear_op_tracking()``).  A profile names such functions:

    tracking: {module: torch_neuronx, fallback_ops: get_fallback_ops,
               executed_ops: get_executed_ops, clear: clear_op_tracking}

and the worker plugin (collectors/worker.py) clears before each test's call and reads
after it: the record's ``fallback_ops`` and its host_only verdict then come from the
backend itself, not from the generic dispatcher path (docs/classification.md,
"Fallback evidence").  ``module`` defaults to the profile's ``backend_module``; a run
that loads another module in its place (``--backend-module``, refdev's stand-in)
finds the functions there.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from torchconform.errors import UserError

# The record's evidence sources (Outcome.evidence, docs/classification.md).
TRACKING = "tracking"
DISPATCHER = "dispatcher"
COUNTER = "counter"
WARNING = "warning"
ALLOCATIONS = "allocations"


def operator_names(value) -> list[str]:
    """A tracking function's result as sorted, qualified operator names: a list, set or
    tuple of names, or a mapping {name: count} (names with a zero count left out)."""
    if not value:
        return []
    if isinstance(value, Mapping):
        names = [k for k, n in value.items() if n]
    elif isinstance(value, (list, tuple, set, frozenset)):
        names = list(value)
    else:
        raise TypeError(f"a tracking function returned {type(value).__name__}, not operator names")
    return sorted({_qualify(str(n)) for n in names})


def _qualify(op: str) -> str:
    return op if "::" in op else "aten::" + op


@dataclass
class Tracking:
    """The resolved functions (None where the profile names none) and where they live."""
    module: str
    fallback_ops: object = None
    executed_ops: object = None
    clear: object = None

    def label(self, what: str) -> str:
        """``torch_neuronx.get_fallback_ops()``: how a record names its source."""
        fn = getattr(self, what)
        return f"{self.module}.{getattr(fn, '__name__', what)}()" if fn is not None else ""

    def reset(self) -> None:
        if self.clear is not None:
            self.clear()

    def read(self) -> tuple[list[str] | None, list[str] | None]:
        """(fallback operators, executed operators) since the last clear; None for a
        function the profile does not name."""
        fallback = operator_names(self.fallback_ops()) if self.fallback_ops is not None else None
        executed = operator_names(self.executed_ops()) if self.executed_ops is not None else None
        return fallback, executed


def resolve(profile, backend_module: str = "") -> Tracking | None:
    """The profile's tracking functions, or None where it names none.  Raises UserError
    when the profile names functions the module lacks: a run that believed it had the
    backend's evidence and silently used another source would say the wrong thing."""
    spec = dict(getattr(profile, "tracking", None) or {})
    if not spec.get("fallback_ops") and not spec.get("executed_ops"):
        return None

    module = spec.get("module") or profile.backend_module
    if backend_module and module == profile.backend_module:
        module = backend_module     # a stand-in loaded in the backend's place offers its API
    if not module:
        raise UserError(f"profile {profile.name}: tracking names functions but no module; "
                        "add tracking.module (or backend_module)")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise UserError(f"profile {profile.name}: tracking module {module!r} cannot be imported ({exc}); "
                        "install the backend or fix tracking.module") from None
    found = Tracking(module)
    for key in ("fallback_ops", "executed_ops", "clear"):
        name = spec.get(key)
        if not name:
            continue
        fn = getattr(mod, name, None)
        if not callable(fn):
            raise UserError(f"profile {profile.name}: tracking.{key} {name!r} is not a function of {module}; "
                            f"fix the name or remove tracking.{key}")
        setattr(found, key, fn)
    return found
