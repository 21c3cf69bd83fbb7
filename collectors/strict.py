"""What a test's fallback operators make of its verdict, on the controller side.

- Strict mode (``run --no-fallback``, ``--tc-no-fallback 1``): a test that passed
  (pass, pass_fallback) but ran operators through the CPU fallback is a ``fail`` of kind
  ``fallback_forbidden`` naming them.  Any other outcome stays (its ``fallback_ops``
  still name the operators): a test that failed, crashed or was skipped for its own
  reason keeps that more useful cause, and an expected failure that passed through the
  fallback (xpass) would have failed as expected had the fallback raised.
- A ``pass_fallback`` with no message of its own says where its fallback evidence came
  from (``fallback evidence: tracking torch_neuronx.get_fallback_ops()``): the stored
  record keeps its source without a new column (docs/classification.md).
"""
from __future__ import annotations

from torchconform.core.outcome import (
    FAIL, FALLBACK_FORBIDDEN, PASS, PASS_FALLBACK, bound_message,
)

EVIDENCE_PREFIX = "fallback evidence: "


def forbidden_message(fallback_ops, evidence: str = "") -> str:
    ops = ", ".join(fallback_ops)
    where = f"; evidence: {evidence}" if evidence else ""
    return bound_message(f"{FALLBACK_FORBIDDEN}: ran {ops} through the CPU fallback (strict mode, "
                         f"run --no-fallback{where})")


def apply(verdict: dict, fallback_ops, evidence: str = "", no_fallback: bool = False) -> dict:
    """``verdict`` (the combined one, a dict) as strict mode and the evidence note make it."""
    ops = list(fallback_ops or ())
    outcome = verdict.get("outcome")
    if no_fallback and ops and outcome in (PASS, PASS_FALLBACK):
        return {"outcome": FAIL, "kind": FALLBACK_FORBIDDEN, "message": forbidden_message(ops, evidence),
                "skiplist_entry": verdict.get("skiplist_entry", "") or ""}
    if outcome == PASS_FALLBACK and evidence and not verdict.get("message"):
        return dict(verdict, message=EVIDENCE_PREFIX + evidence)
    return verdict
