"""The gate end to end over a store: resolve the baseline, evaluate the rules,
confirm flaky tests, evaluate again, render the report.

``cli/cmd_gate.py`` is a thin layer over :func:`gate_build`; tests call it too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from torchconform.ci import flaky as flaky_mod
from torchconform.ci.config import GateConfig, default_config
from torchconform.ci.gate import (
    GateResult, as_records, declared_traits, evaluate, record_breakdown, rerun_candidates,
)
from torchconform.ci.records import Records
from torchconform.core.outcome import FAILED
from torchconform.ci.report import junit_xml, markdown
from torchconform.core import clusters as clusters_mod
from torchconform.gated import gate_context
from torchconform.errors import UserError
from torchconform.db.readback import SUITE as TRAITS_SUITE, compare_traits, traits_from_records
from torchconform.ci.records import Value
from torchconform.db import read_builds, read_rows
from torchconform.db.series import baselines, series_of


@dataclass
class GateRun:
    result: GateResult
    baseline: str | None
    markdown: str
    junit: str
    notes: list[str] = field(default_factory=list)
    confirmations: list = field(default_factory=list)
    not_rerun: dict[str, str] = field(default_factory=dict)   # failing test -> why it was not rerun

    @property
    def exit_code(self) -> int:
        return 0 if self.result.passed else 1


def resolve_baseline(store, build: str, spec: str, branch: str = "") -> str | None:
    """``latest`` / ``latest:BRANCH`` / a build name -> a build name (None: no candidate).

    ``latest`` is the baseline the site shows for ``build``: the newest *other* build of
    its series (device, backend profile, branch, suite set; db/series.py) created no
    later than ``build``, whose runs all completed (a killed baseline would hide missing
    tests).  ``latest:BRANCH`` is the same series on that branch (a pull request's build
    against its target branch).  ``branch``: the branch the gate records on a build
    that has none (``gate --branch``), so ``latest`` looks where the build will belong.
    """
    spec = (spec or "latest").strip()
    if spec != "latest" and not spec.startswith("latest:"):
        store.build_row(spec)  # UserError naming `torchconform builds` when unknown
        if spec == build:
            raise UserError(f"--baseline {spec!r} is the build being gated; pass an earlier build or 'latest'")
        return spec
    on_branch = spec.split(":", 1)[1] if ":" in spec else ""
    if spec.startswith("latest:") and not on_branch:
        raise UserError("--baseline latest: names no branch; use latest, latest:BRANCH or a build name")
    ordered = read_builds.list_builds(store, series=True)   # oldest first, by (created, id): exact order
    mine = next((b for b in ordered if b["name"] == build), None)
    if mine is None:
        store.build_row(build)  # UserError naming `torchconform builds`
    return baselines(ordered, branch=_lookup_branch(spec, mine, branch))[build]


def _lookup_branch(spec: str, row: dict, branch: str) -> str | None:
    """The branch ``latest`` / ``latest:BRANCH`` looks on (None: the build's own)."""
    if spec.startswith("latest:"):
        return spec.split(":", 1)[1]
    return branch if branch and not row["branch"] else None


def _series_text(store, build: str, spec: str, branch: str) -> str:
    """The series ``latest`` / ``latest:BRANCH`` looked in, for the error that found nothing."""
    row = next(b for b in read_builds.list_builds(store, series=True) if b["name"] == build)
    on_branch = _lookup_branch((spec or "latest").strip(), row, branch)
    series = series_of(row)
    return (series.on_branch(on_branch) if on_branch else series).describe()


def load_records(store, build: str, names: dict[int, str] | None = None) -> Records:
    """The build's latest results as Records (ci/records.py): per test, the id of what it
    says (two integers a row, the few distinct values read once), its errors, and its
    full record read only when a rule or the report asks for it.

    ``names``: {tests.id: test id} of the store (``test_names``), shared by both builds
    the gate loads."""
    names = test_names(store) if names is None else names
    rows = list(read_rows.latest_rows(store, build, ("test_pk", "result_id", "value_id", "max_abs_err", "max_rel_err"),
                                    plain=True))
    tids = [names[r[0]] for r in rows]
    vid = dict(zip(tids, map(itemgetter(2), rows)))
    result_of = dict(zip(tids, map(itemgetter(1), rows)))
    errors = {t: (r[3], r[4]) for t, r in zip(tids, rows) if r[3] is not None}
    values = {v: Value(o, k, m, tuple(f.split()), s, d, msg)
              for v, (o, k, m, f, s, d, msg, *_repro_tier) in read_rows.values_by_id(store, set(vid.values())).items()}
    fields = read_rows.OUTCOME_FIELDS

    def fetch(tids: list[str]) -> dict[str, dict]:
        rows = read_rows.results_by_id(store, [result_of[t] for t in tids], fields)
        out = {}
        for t in tids:
            rec = dict(zip(fields, rows[result_of[t]]))
            rec["fallback_ops"] = rec["fallback_ops"].split() if rec["fallback_ops"] else []
            out[t] = rec
        return out
    return Records(vid, values, errors, fetch, lambda suite: read_rows.suite_tests(store, suite), space=store)


def test_names(store) -> dict[int, str]:
    """{tests.id: test id} of every stored test (one read, for both builds of a gate)."""
    return dict(read_rows.stored_tests(store, ("test_id",)))


def gate_build(store, build: str, baseline: str = "latest", config: GateConfig | None = None,
               reruns: int | None = None, rerun_cwd: str | None = None, allow_no_baseline: bool = False,
               branch: str = "", confirm=None, categories=()) -> GateRun:
    """Gate ``build`` against ``baseline``; ``confirm`` replaces the rerun step (tests).
    ``categories``: named failure categories for the report's clusters (clusters.load_categories).

    ``branch``: the branch the build came from, recorded on it when it has none
    yet, so that the next build's ``latest:BRANCH`` finds it.
    """
    config = config or default_config()
    info = read_builds.build_info(store, build)          # UserError if unknown
    base = resolve_baseline(store, build, baseline, branch=branch)
    if base is None and not allow_no_baseline:
        raise UserError(f"no baseline for build {build!r} ({baseline}: no earlier complete build of its series, "
                        f"{_series_text(store, build, baseline, branch)}); pass --baseline NAME, or "
                        "--allow-no-baseline for a first build")
    # Input checked: from here on the gate may write (branch, rerun attempts).
    if branch and not info["branch"]:
        store.ensure_build(build, append=True, branch=branch)   # fills blank columns only
        info["branch"] = branch
    notes: list[str] = []
    if not info["complete"]:
        notes.append(f"Build `{build}` has runs that did not finish; missing tests may follow.")
    if base is None:
        notes.append(f"No baseline found for `{baseline}`: first build, nothing to compare; only the rules that "
                     f"need none ({', '.join(NO_BASELINE_RULES)}) are judged.")
        new = load_records(store, build)
        with gate_context(store, None, build):   # broken_claim judges the build alone
            result = evaluate({}, new, _all_off(config), old_name="(none)", new_name=build)
        for r in result.rules:
            if r.rule not in NO_BASELINE_RULES:
                r.detail = "no baseline"
        return _render(result, None, {}, new, info, config, notes, [], categories=categories)
    names = test_names(store)
    old = load_records(store, base, names)
    new = load_records(store, build, names)
    # what each build declared (the runner records it; collectors/traitfail.py): a failure a
    # trait explains is a regression only when the trait itself changed
    traits = (declared_traits(old, read_builds.build_info(store, base)["metadata"].get("declared_traits")),
              declared_traits(new, info["metadata"].get("declared_traits")))
    if not new:
        notes.append(f"Build `{build}` has no stored outcomes.")

    reruns = config.flaky["reruns"] if reruns is None else reruns
    known_flaky = flaky_mod.stored_flaky(store, build)
    # the lost_operator rule reads both builds' censuses, perf_regression their perf timings
    with gate_context(store, base, build):
        result = evaluate(old, new, config, flaky=known_flaky.values(), old_name=base, new_name=build,
                          traits=traits)
    confirmations, records, not_rerun = [], [], {}
    candidates = [t for t in rerun_candidates(result) if t not in known_flaky]
    if candidates and reruns > 0:
        limit = config.flaky["max_tests"]
        if len(candidates) > limit:
            notes.append(f"{len(candidates)} failing tests; only the first {limit} were rerun for flaky "
                         f"confirmation (flaky.max_tests).")
            candidates = candidates[:limit]
        chosen = new.load(candidates)
        records, not_rerun = flaky_mod.rerunnable([chosen[t] for t in candidates], info["device"], info["profile"])
        notes += _not_rerun_notes(not_rerun, config.report["max_items"])
    if records:
        if confirm is None:
            confirmations = flaky_mod.confirm_and_store(store, build, records, reruns, device=info["device"],
                                                        profile=info["profile"], timeout=config.flaky["timeout"],
                                                        cwd=rerun_cwd)
        else:
            confirmations = confirm(records, reruns)
        flaky = list(known_flaky.values()) + [c.to_dict() for c in confirmations if c.flaky]
        steady = [c for c in confirmations if not c.flaky]
        notes.append(f"Reran {len(confirmations)} failing tests {reruns} times each: "
                     f"{len(confirmations) - len(steady)} flaky, {len(steady)} failed every attempt.")
        with gate_context(store, base, build):
            result = evaluate(old, new, config, flaky=flaky, old_name=base, new_name=build, traits=traits)
    return _render(result, base, old, new, info, config, notes, confirmations, not_rerun, categories)


def _not_rerun_notes(not_rerun: dict[str, str], limit: int) -> list[str]:
    """One note per reason: the failing tests that could not be rerun count as failing."""
    by_why: dict[str, list[str]] = {}
    for test_id, why in not_rerun.items():
        by_why.setdefault(why, []).append(test_id)
    notes = []
    for why, ids in by_why.items():
        shown = ", ".join(f"`{t}`" for t in ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
        notes.append(f"{len(ids)} failing tests not rerun for flaky confirmation ({why}); "
                     f"they count as failing: {shown}.")
    return notes


# Rules that judge the build alone: a first build is judged by them too.
NO_BASELINE_RULES = ("fallback_forbidden", "broken_claim")


def _all_off(config: GateConfig) -> GateConfig:
    """``config`` with every rule off but those that need no baseline."""
    import copy

    off = copy.deepcopy(config)
    for name, rule in off.rules.items():
        if name not in NO_BASELINE_RULES:
            rule.mode = "off"
    return off


def _failing(records) -> dict[str, dict]:
    """The failed records only (what clusters read), loaded in one batch."""
    records = as_records(records)
    return records.load(records.where(lambda v: v.outcome in FAILED))


def _traits(records) -> dict:
    """The traits the build's traits suite measured (its records' notes)."""
    records = as_records(records)
    return traits_from_records(records.load(records.in_suite(TRAITS_SUITE)).values())


def _render(result, base, old, new, info, config, notes, confirmations, not_rerun=None, categories=()) -> GateRun:
    build = result.new
    old_b = record_breakdown(base or "(none)", old)
    new_b = record_breakdown(build, new)
    limit = config.report["max_items"]
    clusters = clusters_mod.order(clusters_mod.from_records(_failing(new), categories),
                                  clusters_mod.from_records(_failing(old), categories) if base else None)
    traits = compare_traits(_traits(old), _traits(new)) if base else []
    text = markdown(result, old_b, new_b, limit=limit, device=info["device"], notes=notes, clusters=clusters,
                    traits=traits)
    return GateRun(result=result, baseline=base, markdown=text, junit=junit_xml(result, limit=limit),
                   notes=notes, confirmations=confirmations, not_rerun=not_rerun or {})
