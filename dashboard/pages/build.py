"""Build page: breakdown, per suite, per test file, top missing operators, links to the rest."""
from __future__ import annotations

from torchconform.core.breakdown import format_breakdown
from torchconform.core.outcome import BACKEND_SKIP_KINDS, OUTCOMES
from torchconform.dashboard import charts, distributed
from torchconform.dashboard import claims as claims_mod
from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.styles import breakdown_counts, pass_rate
from torchconform.dashboard.tables import Table
from torchconform.dashboard.tiers import tables as tier_tables_of
from torchconform.db.readback import ENVIRONMENT_KEYS

# Failures listed at once on a build page (the filters find the others).
FAILURES_SHOWN = 200
# Metadata shown at the top of a build page, in this order, when present.
META_KEYS = ("created", "branch", "device", "backend", "backend_version", "profile", "torch_version",
             "torch_git", "commit")


def _meta_text(key: str, value) -> str:
    """A metadata value as one line; the environment as its main facts (the evaluation page has it all)."""
    if key == "claims":
        return claims_mod.meta_text(value)
    if key == "environment" and isinstance(value, dict):
        return "; ".join(f"{k} {value[k]}" for k in ENVIRONMENT_KEYS if value.get(k) not in (None, ""))
    return str(value)


def _by_table(stem: str, title: str, key: str, rows: list[dict]) -> Table:
    t = Table(stem, [key, "outcomes", "pass", "pass_fallback", "failed", "skip_eligibility",
                     "skip_backend", *BACKEND_SKIP_KINDS, "xfail", "xpass", "pass rate %"], title=title)
    for row in rows:
        b = row["summary"]
        o, k = b["outcomes"], b["backend_skip_kinds"]
        rate = pass_rate(b)
        t.rows.append([row["key"], b["total"], o["pass"], o["pass_fallback"],
                       o["fail"] + o["error"] + o["crash"] + o["timeout"], o["skip_eligibility"],
                       o["skip_backend"], *(k[x] for x in BACKEND_SKIP_KINDS), o["xfail"], o["xpass"],
                       round(100 * rate, 2) if rate is not None else None])
    return t


def render(site, build: BuildInfo, by_suite: list[dict], by_file: list[dict], generated: str,
           apis: list = (), failures: dict | None = None, retired: int | None = None, coverage: str = "",
           tiers: dict | None = None, claims: dict | None = None):
    """``apis``: the distributed suite's rows (distributed.for_build); its table only when there are any.
    ``failures``: {"failed", "skipped", "clusters"} counts of the build's failure data (failures.py).
    ``retired``: the ``--full-builds`` past which this build is (retention.py): the small page,
    without links to detail pages or the failure list.  ``coverage``: the coverage audit's
    figure (pages/coverage.figure), linked to its page; "" without one.  ``tiers``: the
    build's tolerance tiers (dashboard/tiers.read), None without any.  ``claims``: the support
    manifest (dashboard/claims.read), None when the build recorded no claims."""
    base = f"builds/{build.slug}/"
    root = "../../"
    failures_config = {"root": root, "slug": build.slug, "search": f"{root}search.html", "limit": FAILURES_SHOWN}
    b = build.summary
    outcomes = Table(base + "outcomes", ["outcome", "count"], title="Outcomes")
    outcomes.rows = [[o, b["outcomes"][o]] for o in OUTCOMES] + \
                    [[f"skip_backend/{k}", b["backend_skip_kinds"][k]] for k in BACKEND_SKIP_KINDS] + \
                    [[f"fail/{k}", n] for k, n in sorted((b.get("fail_kinds") or {}).items())]
    suites = _by_table(base + "suites", "Per suite", "suite", by_suite)
    files = _by_table(base + "files", "Per test file", "file", by_file)
    missing = Table(base + "top-missing", ["operator", "tests blocked"], title="Top missing operators")
    missing.rows = [[m["op"], m["tests"]] for m in b["missing_ops"]]
    apis_table = distributed.table(base + "distributed", apis) if apis else None
    tier_tables = tier_tables_of(base, tiers)
    claims_table = claims_mod.table(base, claims)
    meta = [("build", build.name)] + [(k, build.meta.get(k)) for k in META_KEYS if build.meta.get(k)]
    extra = build.meta.get("metadata") or build.meta.get("extra") or {}
    if isinstance(extra, dict):
        meta += [(str(k), _meta_text(k, v)) for k, v in sorted(extra.items())]
    return site.page(base + "index.html", "build.html", title=f"Build {build.name}", build=build,
                     meta=meta, bar=charts.breakdown_bar(b), counts=breakdown_counts(b),
                     breakdown_text=format_breakdown({**b, "complete": build.complete, **(tiers or {})}),
                     outcomes_table=outcomes, suites_table=suites, tier_tables=tier_tables,
                     files_table=files, missing_table=missing, distributed_table=apis_table,
                     has_census=build.has_census, coverage=coverage, failures_config=failures_config, retired=retired,
                     failures=failures or {"failed": 0, "skipped": 0, "clusters": 0},
                     claims=claims, claims_table=claims_table,
                     downloads=[outcomes, suites, files, missing] + ([apis_table] if apis_table else []) + tier_tables
                     + ([claims_table] if claims_table else []),
                     generated=generated)
