"""Failures a declared trait explains: ``fail`` with kind ``trait:<name>``.

A backend profile declares what the device computes a dtype in
(``dtype_policy.downcast``, e.g. ``{float64: float32}``: the trait
``float64_as_float32``, as on Neuron and refdev young-backend).  A float64 test
whose result overflows float32's range then fails ("Greatest absolute
difference: inf"), and without more that failure cannot be told from a real
numerical bug.  This module holds the pure parts (docs/classification.md,
"Failures a declared trait explains"):

* ``candidate_trait``: which failures may be explained at all: outcome ``fail``
  without a kind, a dtype the policy downcasts, and a closeness failure (the
  worker found torch.testing's mismatch statistics in the exception chain);
* ``rule_reason``: the rule for backends that cannot switch the trait off (no
  ``trait_off`` hook in their profile): the mismatch must be one the lower
  precision produces (an infinite difference: one side overflowed the lower
  dtype's range; or a relative difference within ``RULE_EPS`` epsilons of it);
* ``attributed``: the record with the kind and the message suffix that says how
  the attribution was made (rerun with the trait off, or by rule).

The rerun that verifies an attribution on backends that can switch the trait off
(refdev) is ``collectors/traitrerun.py``.
"""
from __future__ import annotations

import dataclasses
import math
import re

from torchconform.core.outcome import FAIL, MESSAGE_LIMIT, TRAIT_KIND_PREFIX, Outcome, bound_message

# A relative difference within this many epsilons of the lower dtype is one its rounding
# gives (a correctly rounded result is within eps/2; a few operations compound that).
RULE_EPS = 4.0
_EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
_MAX = {"float32": 3.4028234663852886e38, "float16": 65504.0, "bfloat16": 3.3895313892515355e38}
# A complex dtype is a pair of its real dtype: complex128 -> complex64 is float64 -> float32.
_REAL = {"complex128": "float64", "complex64": "float32", "complex32": "float16"}

VIA_RERUN = "rerun with the trait off passed"
VIA_RULE = "by rule"

# torch.testing's mismatch message (assert_close, TestCase.assertEqual): the header, then
# "Greatest absolute difference: D at index I (up to T allowed)" (tensors) or
# "Absolute difference: D (up to T allowed)" after "Expected E but got A." (scalars).
_HEADER = re.compile(r"\bare not (?:close|equal)!")
_DIFF = re.compile(r"(?:Greatest )?(absolute|relative) difference: (\S+?)(?: at index [^\n]*?)?"
                   r"(?: \(up to (\S+) allowed\))?\s*$", re.IGNORECASE | re.MULTILINE)
_SCALARS = re.compile(r"Expected (\S+) but got (\S+?)\.?\s*$", re.MULTILINE)


def trait_kind(trait: str) -> str:
    return TRAIT_KIND_PREFIX + trait


def _real(dtype: str) -> str:
    return _REAL.get(dtype, dtype)


def downcast_trait(dtype: str, policy: dict) -> tuple[str, str] | None:
    """(trait name, the real dtype it computes in) when ``policy`` downcasts ``dtype``:
    float64 -> float32 and complex128 -> complex64 are both ``float64_as_float32``."""
    lower = (policy.get("downcast") or {}).get(dtype) if dtype else None
    if not lower:
        return None
    return f"{_real(dtype)}_as_{_real(lower)}", _real(lower)


def declared_traits(policy: dict) -> list[str]:
    """The traits a dtype policy declares (what a build records as ``declared_traits``)."""
    return sorted({downcast_trait(d, policy)[0] for d in (policy.get("downcast") or {})})


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def parse_mismatch(text: str) -> dict | None:
    """torch.testing's mismatch statistics from a rendered failure: {"abs", "rel",
    "atol", "rtol"} (floats, inf and nan included; a tolerance None when not shown), plus
    "expected"/"actual" for scalars; None when the text holds no closeness failure."""
    if not text or not _HEADER.search(text):
        return None
    found: dict = {}
    for m in _DIFF.finditer(text):
        key = "abs" if m.group(1).lower() == "absolute" else "rel"
        if key not in found:  # the first failure of the chain (the root cause renders first)
            found[key] = _number(m.group(2))
            found["atol" if key == "abs" else "rtol"] = _number(m.group(3))
    if found.get("abs") is None and found.get("rel") is None:
        return None
    scalars = _SCALARS.search(text)
    if scalars:
        found["expected"], found["actual"] = _number(scalars.group(1)), _number(scalars.group(2))
    return found


def candidate_trait(o: Outcome, mismatch: dict | None, policy: dict) -> tuple[str, str] | None:
    """(trait, lower dtype) when ``o`` is a failure the policy's downcast may explain."""
    if o.outcome != FAIL or o.kind or not mismatch:
        return None
    return downcast_trait(o.dtype, policy)


def rule_reason(mismatch: dict, lower: str) -> str | None:
    """Why ``mismatch`` is one computing in ``lower`` gives, or None (not explained).

    - an infinite absolute difference: one side overflowed the lower dtype's range.  Which
      side is the device's the text cannot say (torch.testing's "expected" is whichever
      argument the test passed second, and upstream tests pass both orders: test_nan_to_num
      compares numpy's result with the device's, so its relative difference is inf/inf =
      nan); with scalars the values are shown, and one must be infinite and the other
      finite and beyond the lower dtype's largest;
    - a finite relative difference of at most ``RULE_EPS`` epsilons of ``lower``."""
    diff, rel = mismatch.get("abs"), mismatch.get("rel")
    expected, actual = mismatch.get("expected"), mismatch.get("actual")
    if diff is not None and math.isinf(diff):
        if expected is not None and actual is not None:
            big = _MAX.get(lower, math.inf)
            for a, b in ((expected, actual), (actual, expected)):
                if math.isfinite(a) and abs(a) > big and math.isinf(b):
                    return f"{a:g} is beyond {lower}'s range"
            return None
        return f"an infinite difference: one side overflowed {lower}'s range"
    eps = _EPS.get(lower)
    if rel is not None and eps and math.isfinite(rel) and rel <= RULE_EPS * eps:
        return f"relative difference {rel:.3g} is within {RULE_EPS:g} eps of {lower}"
    return None


def attributed(o: Outcome, trait: str, how: str) -> Outcome:
    """``o`` as ``fail`` / ``trait:<trait>``, its message ending in how that was decided
    (the suffix always survives the message limit: the original text is cut instead)."""
    suffix = f"[attributed to trait {trait}: {how}]"
    head = bound_message(o.message, MESSAGE_LIMIT - len(suffix) - 1)
    return dataclasses.replace(o, kind=trait_kind(trait), message=f"{head} {suffix}" if head else suffix)
