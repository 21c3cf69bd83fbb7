"""Outcomes for runs a dead or stuck process never reported.

Shared by the engines so a crash reads the same whether a local worker or a
Ray worker died.  The wording matches the classifier's crash and timeout
markers (``worker 'NAME' crashed while running``, ``torchconform timeout:``),
so ingesting these messages again classifies them the same way.
"""
from __future__ import annotations

from torchconform import procs
from torchconform.core.classify import TIMEOUT_PREFIX
from torchconform.core.outcome import CRASH, TIMEOUT, Outcome
from torchconform.suites.models.check import make_outcome

# A worker that ran out of memory exits with this code (see sweep/worker.py).
EXIT_OOM = 86


def describe_exit(exitcode: int | None, memory_limit_mb: int = 0) -> str:
    if exitcode is None:
        return "vanished"
    if exitcode == EXIT_OOM:
        limit = f" (limit {memory_limit_mb} MiB)" if memory_limit_mb else ""
        return f"ran out of memory{limit}"
    if exitcode < 0:
        return "was " + procs.describe_exit(exitcode)
    return f"exited with status {exitcode}"


def unreported(model_id: str, variants, done: set, current: str, device: str, outcome: str,
               reason: str, seconds: float) -> list[Outcome]:
    """Outcomes for the runs of ``model_id`` not in ``done``: the interrupted one
    (``current``) gets the reason, later ones say they never ran."""
    out = []
    pending = [v for v in variants if v not in done]
    interrupted = current if current in pending else (pending[0] if pending else "")
    for variant in pending:
        message = f"{TIMEOUT_PREFIX} {reason}" if outcome == TIMEOUT else reason
        if variant != interrupted:
            message += f" (not run: the worker died during {interrupted})"
        out.append(make_outcome(model_id, variant, device, "float32", outcome, message=message,
                            duration=seconds if variant == interrupted else 0.0))
    return out


def crash(model_id, variants, done, current, device, worker, exit_text, seconds):
    reason = f"worker '{worker}' crashed while running {model_id}::{current or 'build'}: it {exit_text}"
    return unreported(model_id, variants, done, current, device, CRASH, reason, seconds)


def timeout(model_id, variants, done, current, device, limit, seconds):
    reason = f"{model_id}::{current or 'build'} exceeded {limit:g}s; the worker was killed"
    return unreported(model_id, variants, done, current, device, TIMEOUT, reason, seconds)
