"""What the support manifest needs of one stored build (torchconform/core/claims.py judges it):
the claims recorded with the build, its latest results grouped into cells, and its census.

The claims come from the build's metadata (``claims``: the backend profile's claims, resolved
and recorded by the runner when the build ran), so a stored build is judged by what its backend
claimed then, not by a profile file that may have changed since.  A build that recorded none
(stored before claims, ingested JUnit) can be judged against a profile's claims given now
(``claims_of(..., given=...)``), and the report says so.
"""
from __future__ import annotations

import re
from collections import Counter

from sqlalchemy import func, select

from torchconform.core.claims import Cell, Claims, ClaimReport, judge
from torchconform.core.dispatch import Row
from torchconform.core.outcome import FAILED
from torchconform.db.models import census_ops, result_values, results, tests
from torchconform.db.read_rows import latest_results
from torchconform.errors import UserError

V = result_values.c


def recorded_claims(store, build: str) -> dict | None:
    """The claims recorded with ``build`` ({operators, dtypes, features}), None when it has none.
    An unknown build is the store's one-line UserError."""
    meta = store.build_row(build).get("metadata") or {}
    claims = meta.get("claims")
    return claims if isinstance(claims, dict) and claims else None


# The plugin's leak check names the operators that leaked (collectors/devicecheck.py): the cause
# of the failure, whichever test's teardown found it.
CULPRITS = re.compile(r"leaking operators: (.+)$")
_KEY = (tests.c.suite, tests.c.op, tests.c.variant, tests.c.dtype, V.outcome, V.kind, V.missing_op)


def culprits(message: str) -> tuple:
    """The operators a failure's message names as its cause ("aten::flip x6, aten::add x1")."""
    m = CULPRITS.search(message or "")
    return tuple(sorted({part.strip().rsplit(" x", 1)[0] for part in m.group(1).split(",") if part.strip()})) \
        if m else ()


def result_cells(store, build: str) -> list[Cell]:
    """The build's latest results counted per (suite, op, variant, dtype, outcome, kind, missing_op),
    failures whose message names the operators that caused them (a leak) apart, with those operators."""
    with store.read() as conn:
        build_id = store.build_id(build, conn)
        source = latest_results(build_id).join(tests, tests.c.id == results.c.test_pk)
        counts = Counter({tuple(row[:-1]): row[-1] for row in conn.execute(
            select(*_KEY, func.count()).select_from(source).group_by(*_KEY))})
        named = Counter()
        for *key, message in conn.execute(select(*_KEY, V.message).select_from(source).where(
                V.outcome.in_(sorted(FAILED)), V.message.like("%leaking operators: %"))):
            found = culprits(message)
            if found:
                named[(tuple(key), found)] += 1
    for (key, _), n in named.items():
        counts[key] -= n
    return [Cell(*key, n) for key, n in counts.items() if n > 0] + \
           [Cell(*key, n, culprits=found) for (key, found), n in named.items()]


def census_rows(store, build: str) -> list[Row] | None:
    """The build's census (core.dispatch.Row, what the judge reads), None when none was taken."""
    with store.read() as conn:
        build_id = store.build_id(build, conn)
        rows = conn.execute(select(census_ops.c.op, census_ops.c.status, census_ops.c.covered,
                                   census_ops.c.blocked_by).where(census_ops.c.build_id == build_id)).all()
    if not rows:
        return None
    return [Row(op, status, covered=None if covered is None else bool(covered), blocked_by=(blocked or "").split())
            for op, status, covered, blocked in rows]


def claims_of(store, build: str, given: dict | None = None) -> tuple[ClaimReport | None, str]:
    """(the build's claim report, where its claims came from); (None, why) when there are no claims.
    ``given``: claims to judge the build against when it recorded none (a profile's, read now)."""
    claims = recorded_claims(store, build)
    source = "recorded with the build"
    if claims is None:
        if not given:
            return None, (f"build {build!r} recorded no claims (its backend profile declared none, or it was stored "
                          "before claims were recorded)")
        claims, source = given, "read from the profile now (the build recorded none)"
    report = judge(Claims.from_dict(claims), result_cells(store, build), census_rows(store, build))
    return report, source


def require_claims(store, build: str, given: dict | None = None) -> tuple[ClaimReport, str]:
    """``claims_of`` or a one-line UserError naming the fix."""
    report, source = claims_of(store, build, given)
    if report is None:
        raise UserError(f"{source}; declare `claims:` in the backend profile (docs/profiles.md) and run again, "
                        "or pass --profile PATH to judge it against that profile's claims now")
    return report, source
