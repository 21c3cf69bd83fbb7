"""What to implement next: the K operators whose implementation unblocks the most models.

A model is unblocked when every operator of its blocking set (census.models) runs
on the device.  The value of a set S of operators is the pair (models whose whole
blocking set is in S, tests blocked by an operator of S), compared in that order;
tests are only known per first missing operator (results.missing_op), so they add
up per operator.

Greedy is not optimal (two operators that together finish three models beat one
that finishes two), so :func:`plan` finds the exact optimum: a model with more than
K blockers can never be finished by K operators, so only the operators of the
smaller sets ("candidates") decide the models count; an optimal set is a union of
candidate sets plus, in the remaining slots, the operators with the most tests
(tests are additive).  Those unions are searched depth first, each once; past SEARCH_LIMIT
(unions evaluated x distinct sets compared) the plan falls back to a greedy one
and says so.  The chosen operators are then ordered so that every prefix is as
good as it can be (exactly for up to ORDER_EXACT operators, by dynamic programming
over subsets; greedily beyond).

Everything here is a pure function over plain sets and counts except
:func:`load_impact`, which reads a build.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from torchconform.errors import UserError

# Work bound of the exact search: unions evaluated x distinct candidate sets compared.
SEARCH_LIMIT = 2_000_000
# The order of up to this many chosen operators is exact (2**n subsets).
ORDER_EXACT = 12


@dataclass
class Step:
    op: str
    models: list[str]          # models fully unblocked by this step (their last blocker)
    tests: int                 # tests blocked by this operator (first missing op)
    total_models: int          # models unblocked by the steps so far
    total_tests: int
    blocks: int = 0            # models whose blocking set holds this operator
    through: list[str] = field(default_factory=list)  # composites reaching it (none: reached directly)

    def to_dict(self) -> dict:
        return {"op": self.op, "unblocks_models": self.models, "tests": self.tests,
                "total_models": self.total_models, "total_tests": self.total_tests,
                "models_blocked": self.blocks, "through": self.through}


@dataclass
class Plan:
    build: str
    k: int
    steps: list[Step]
    exact: bool                # False: the greedy fallback (search past SEARCH_LIMIT)
    models: int                # traced models with at least one blocker
    untraced: list[str] = field(default_factory=list)  # models without an operator set (not planned)
    note: str = ""

    def to_dict(self) -> dict:
        return {"build": self.build, "k": self.k, "method": "exact" if self.exact else "greedy",
                "note": self.note, "blocked_models": self.models, "untraced_models": self.untraced,
                "steps": [s.to_dict() for s in self.steps]}


def value(chosen: Iterable[str], models: dict[str, frozenset], tests: dict[str, int]) -> tuple[int, int]:
    """(models whose blocking set is inside ``chosen``, tests blocked by ``chosen``)."""
    chosen = set(chosen)
    return (sum(1 for ops in models.values() if ops <= chosen), sum(tests.get(op, 0) for op in chosen))


def _universe(models: dict[str, frozenset], tests: dict[str, int]) -> list[str]:
    """Every operator worth a step: it blocks a model or a test."""
    return sorted(set().union(*models.values(), (op for op, n in tests.items() if n > 0)))


def _fill(chosen: frozenset, k: int, ranked: list[str]) -> frozenset:
    """``chosen`` plus, up to k operators, the best-ranked others (most tests first)."""
    out = set(chosen)
    for op in ranked:
        if len(out) >= k:
            break
        out.add(op)
    return frozenset(out)


def best_set(models: dict[str, frozenset], tests: dict[str, int], k: int,
             limit: int = SEARCH_LIMIT) -> tuple[frozenset, bool]:
    """(an optimal set of at most k operators, exact); exact False: greedy, the search was too big."""
    universe = _universe(models, tests)
    appearances = {op: sum(op in ops for ops in models.values()) for op in universe}
    # the fill order: most tests, then in most blocking sets (progress towards big models), then name
    ranked = sorted(universe, key=lambda op: (-tests.get(op, 0), -appearances[op], op))
    small = sorted({ops for ops in models.values() if 0 < len(ops) <= k}, key=lambda s: (len(s), sorted(s)))
    best, best_val = _fill(frozenset(), k, ranked), None
    work = 0
    seen: set[frozenset] = set()   # a union reached along another path is not searched again

    def consider(union: frozenset):
        nonlocal best, best_val
        full = _fill(union, k, [op for op in ranked if op not in union])
        val = value(full, models, tests)
        if best_val is None or val > best_val:
            best, best_val = full, val

    def search(union: frozenset) -> bool:
        # every union is searched once, with every set as a child: dedup by union is then complete
        nonlocal work
        consider(union)
        work += len(small)
        if work > limit:
            return False
        for ops in small:
            grown = union | ops
            if len(grown) > k or grown == union or grown in seen:
                continue
            seen.add(grown)
            if not search(grown):
                return False
        return True

    if search(frozenset()):
        return best, True
    return greedy_set(models, tests, k, ranked), False


def greedy_set(models: dict[str, frozenset], tests: dict[str, int], k: int, ranked: list[str]) -> frozenset:
    """The fallback: repeatedly add what finishes the most models per operator added (a model's
    missing remainder, or one operator by its tests), while k allows."""
    chosen: set[str] = set()
    while len(chosen) < k:
        best_move, best_rate = None, None
        for ops in models.values():
            rest = ops - chosen
            if rest and len(chosen) + len(rest) <= k:
                gain = value(chosen | rest, models, tests)
                base = value(chosen, models, tests)
                rate = ((gain[0] - base[0]) / len(rest), (gain[1] - base[1]) / len(rest))
                if best_rate is None or rate > best_rate:
                    best_move, best_rate = rest, rate
        single = next((op for op in ranked if op not in chosen), None)
        if single is not None:
            rate = (value(chosen | {single}, models, tests)[0] - value(chosen, models, tests)[0],
                    tests.get(single, 0))
            if best_rate is None or rate > best_rate:
                best_move = {single}
        if not best_move:
            break
        chosen |= best_move
    return frozenset(chosen)


def order(chosen: Iterable[str], models: dict[str, frozenset], tests: dict[str, int]) -> list[str]:
    """``chosen`` in the order whose prefixes are each as good as possible (lexicographically:
    the best first step, then the best two given it, ...).  Exact by dynamic programming over
    subsets up to ORDER_EXACT operators, greedy beyond (ties by name)."""
    ops = sorted(chosen)
    if len(ops) > ORDER_EXACT:
        out: list[str] = []
        while len(out) < len(ops):
            rest = [op for op in ops if op not in out]
            out.append(max(rest, key=lambda op: value(out + [op], models, tests)))  # first of equals: by name
        return out
    index = {op: i for i, op in enumerate(ops)}
    full = (1 << len(ops)) - 1
    memo: dict[int, tuple[tuple, list[str]]] = {full: ((), [])}

    def best(mask: int) -> tuple[tuple, list[str]]:
        if mask in memo:
            return memo[mask]
        result = None
        prefix = [op for op in ops if mask >> index[op] & 1]
        for op in ops:       # alphabetical: the first of equals wins
            bit = 1 << index[op]
            if mask & bit:
                continue
            tail_vals, tail = best(mask | bit)
            cand = ((value(prefix + [op], models, tests), *tail_vals), [op, *tail])
            if result is None or cand[0] > result[0]:
                result = cand
        memo[mask] = result
        return result

    return best(0)[1]


def plan(models: dict[str, Iterable[str]], tests: dict[str, int], k: int, build: str = "",
         through: dict[str, list[str]] | None = None, untraced: Iterable[str] = (),
         limit: int = SEARCH_LIMIT) -> Plan:
    """The plan for ``k`` steps.  ``models``: model -> its blocking operators (models with none
    are left out: nothing to do); ``tests``: operator -> tests it blocks; ``through``: operator ->
    the composites reaching it only through a decomposition (shown, not used)."""
    if k < 1:
        raise UserError(f"--top {k}: a plan needs at least one step; pass --top 1 or more")
    sets = {m: frozenset(ops) for m, ops in models.items() if ops}
    chosen, exact = best_set(sets, tests, k, limit)
    steps, done = [], set()
    so_far: list[str] = []
    for op in order(chosen, sets, tests):
        so_far.append(op)
        now = {m for m, ops in sets.items() if ops <= set(so_far)}
        n_models, n_tests = value(so_far, sets, tests)
        steps.append(Step(op, sorted(now - done), tests.get(op, 0), n_models, n_tests,
                          sum(op in ops for ops in sets.values()), list((through or {}).get(op, []))))
        done = now
    note = "" if exact else (f"greedy plan: the exact search passed its limit of {limit:,} comparisons "
                             f"({len(sets)} blocked models); it may not be optimal")
    return Plan(build, k, steps, exact, len(sets), sorted(untraced), note)


def format_plan(p: Plan) -> str:
    head = (f"plan for build {p.build}: {len(p.steps)} operators to implement "
            f"({'exact' if p.exact else 'greedy'}; {p.models} models blocked")
    head += f", {len(p.untraced)} models without an operator set not planned)" if p.untraced else ")"
    lines = [head]
    if p.note:
        lines.append(f"note: {p.note}")
    for i, s in enumerate(p.steps, 1):
        via = f" (through {', '.join(s.through)})" if s.through else ""
        unblocks = ", ".join(s.models) if s.models else "-"
        lines.append(f"{i:>3}. {s.op}{via}: unblocks {len(s.models)} models ({unblocks}), {s.tests} tests; "
                     f"total {s.total_models} models, {s.total_tests} tests")
    if not p.steps:
        lines.append("  nothing blocks a test or a traced model of this build")
    return "\n".join(lines)
