"""Which builds belong together: a build's *series*, and its baseline within the series.

A series is (device, backend profile, branch, suite set).  Builds of one series ran the
same kind of tests on the same kind of backend along one branch, so comparing them
means something; two builds of different series do not (a 6-test JUnit ingest against
a 1,510-test ops run reports every test of the bigger one as absent).  The site's
trends, diffs and home cards and the gate's ``--baseline latest`` / ``latest:BRANCH``
all come from this module, so they cannot disagree.

- device: the build's ``device`` column.
- backend profile: what the runner recorded as ``metadata["backend_profile"]`` (the
  backend profile the plugin loaded: ``refdev``, ``neuron``, ...), else the build's
  ``profile`` column (an ingested JUnit report, a build written through the store's
  API).  For refdev the ``profile`` column names the simulated backend state
  (``young-backend``, ``full``, a gate fixture's profile file), which the project's own
  gate tests change between two builds to model a regression; the backend is the same.
- branch: the ``branch`` column ("" when none was recorded).
- scope: what narrowed the selection, as the runner recorded it in ``metadata["scope"]``
  (``ops=add,abs``, ``-k sin``, ``strict``: ``run --ops``, ``-k``, ``--no-fallback``), ""
  for a whole selection.  A targeted or strict run is its own series, so ``--baseline
  latest`` never takes it as the baseline of a whole run (nor the other way round).
- suite set: the suites the build ran, sorted and joined with ``+`` ("modules+ops"):
  the suites of its runs plus the suites of its recorded plan (``metadata["plan"]``,
  written by ``run --suite-set`` / ``--suite all`` and by sharded runs), so a suite-set
  build whose later steps have not run yet is already in its final series.  Each run is
  one suite's (the runner, the sweep, one ingested file), so the runs name the suites it
  has results for without reading the results.  The gate's flaky reruns (suite
  ``gate-rerun``) rerun tests of the build's own suites and are left out.  The name of
  the suite set is not recorded anywhere (only its steps are), so the suites stand for it.

The baseline of a build is the newest *complete* build before it (in ``list_builds``
order: created, then id) of the same series; an interrupted build is never anyone's
baseline, since its missing tests would look like tests the next build lost.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

# ci/flaky.RERUN_SUITE: the gate's confirmation reruns are attempts of tests the build
# already has, not a suite of their own (the store must not import the gate).
RERUN_SUITES = frozenset({"gate-rerun"})
SEPARATOR = "+"


@dataclass(frozen=True)
class Series:
    device: str
    profile: str
    branch: str
    suite_set: str
    scope: str = ""

    def on_branch(self, branch: str) -> "Series":
        """The same series on another branch (what ``latest:BRANCH`` looks in)."""
        return replace(self, branch=branch)

    @property
    def suites(self) -> list[str]:
        return self.suite_set.split(SEPARATOR) if self.suite_set else []

    def as_dict(self) -> dict:
        out = {"device": self.device, "profile": self.profile, "branch": self.branch, "suite_set": self.suite_set}
        if self.scope:   # a whole selection's series reads as it always did
            out["scope"] = self.scope
        return out

    def describe(self) -> str:
        """One line naming every part, for reports and error messages."""
        return (f"device {self.device or '(unknown)'} · profile {self.profile or '(none)'} · "
                f"branch {self.branch or '(none)'} · suites {self.suite_set or '(none)'}"
                + (f" · scope {self.scope}" if self.scope else ""))


def suite_set(run_suites, plan=None) -> str:
    """The suite set of a build from its runs' suites and its recorded plan (see above)."""
    suites = {str(s) for s in run_suites if s and s not in RERUN_SUITES}
    for step in plan if isinstance(plan, list) else ():
        if isinstance(step, dict) and step.get("suite") and step["suite"] not in RERUN_SUITES:
            suites.add(str(step["suite"]))
    return SEPARATOR.join(sorted(suites))


def backend_profile(build: dict) -> str:
    meta = build.get("metadata") or {}
    recorded = meta.get("backend_profile") if isinstance(meta, dict) else None
    return str(recorded or build.get("profile") or "")


def scope(build: dict) -> str:
    meta = build.get("metadata") or {}
    return str(meta.get("scope") or "") if isinstance(meta, dict) else ""


def series_of(build: dict) -> Series:
    """The series of a ``queries.list_builds(store, series=True)`` row (it carries ``suite_set``)."""
    return Series(device=str(build.get("device") or ""), profile=backend_profile(build),
                  branch=str(build.get("branch") or ""), suite_set=str(build.get("suite_set") or ""),
                  scope=scope(build))


def baselines(builds: list[dict], branch: str | None = None) -> dict[str, str | None]:
    """build name -> name of its baseline (None: the first complete one of its series).

    ``builds``: ``list_builds(store, series=True)`` rows, oldest first.  ``branch``: look
    in each build's series on that branch instead (``gate --baseline latest:BRANCH``).
    The one rule of the site (dashboard/model.py) and the gate (ci/pipeline.py)."""
    last_complete: dict[Series, str] = {}
    out: dict[str, str | None] = {}
    for b in builds:
        series = series_of(b)
        out[b["name"]] = last_complete.get(series.on_branch(branch) if branch else series)
        if b.get("complete", True):
            last_complete[series] = b["name"]
    return out
