"""Flaky confirmation: rerun a failing test alone, several times, on the same device.

Each attempt is one fresh ``pytest`` process with the torchconform plugin,
running just that test (isolation: no neighbour can leave state behind).  The
command is the test's own recorded repro command (same interpreter, same file,
same ``--tc-device``/``--tc-profile``, same refdev profile variable), plus
``--tc-jsonl`` so that the plugin's classification of the attempt comes back
to us.  Each attempt is stored in the build as another result of the test
with its attempt number (2, 3, ...); ``torchconform.db.read_changes.flaky_tests``
reads them back, so a test's flaky history is queryable.

A test is ``flaky`` when any attempt passes: reported by the gate, not failing.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Iterable

from torchconform.core.outcome import CRASH, PASSED, TIMEOUT, Outcome, bound_message
from torchconform.procs import SCRUBBED_ENV, SCRUBBED_PREFIXES, rerun_env  # noqa: F401 (the gate's names)
from torchconform.collectors.repro import checkout_root
from torchconform.db import read_changes

# The rerun's environment: the original run's minus what must not leak into it
# (torchconform.procs.rerun_env, shared with the trait reruns of collectors/traitrerun.py).
RERUN_SUITE = "gate-rerun"


@dataclass
class Attempt:
    attempt: int
    outcome: Outcome


@dataclass
class Confirmation:
    test_id: str
    attempts: list[Attempt] = field(default_factory=list)   # the reruns (attempt >= 2)
    first: str = ""                                         # outcome label of attempt 1

    @property
    def flaky(self) -> bool:
        return any(a.outcome.outcome in PASSED for a in self.attempts)

    def to_dict(self) -> dict:
        attempts = [{"attempt": 1, "outcome": self.first}] if self.first else []
        attempts += [{"attempt": a.attempt, "outcome": _label(a.outcome)} for a in self.attempts]
        return {"test_id": self.test_id, "flaky": self.flaky, "attempts": attempts}


def _label(o: Outcome) -> str:
    return f"{o.outcome}/{o.kind}" if o.kind else o.outcome


# -- building the command -----------------------------------------------------------------
class NotRerunnable(ValueError):
    """A test the gate has no command for (no repro command, no device): reported as not
    rerun, never a crash of the gate."""

    def __init__(self, test_id: str, why: str):
        super().__init__(f"test {test_id} cannot be rerun: {why}")
        self.why = why


def rerunnable(records: Iterable[dict], device: str = "", profile: str = "") -> tuple[list[dict], dict[str, str]]:
    """(the records ``rerun_command`` can rerun, {test_id: why not} for the others)."""
    ok, not_rerun = [], {}
    for rec in records:
        try:
            rerun_command(rec, device, profile)
        except NotRerunnable as exc:
            not_rerun[rec["test_id"]] = exc.why
        else:
            ok.append(rec)
    return ok, not_rerun


def rerun_command(record: dict, device: str = "", profile: str = "") -> tuple[dict, list[str]]:
    """(environment additions, argv) that rerun one test with the plugin.

    The runner's repro command is preferred: it carries the device, backend profile and
    refdev profile of the original run, and names the test relative to the torchconform
    checkout (run_attempt starts it there); its ``python`` is this interpreter.  Without
    one, the test id is run from the current folder with ``device``/``profile``.
    """
    env: dict[str, str] = {}
    argv: list[str] = []
    repro = (record.get("repro") or "").strip()
    if repro:
        tokens = shlex.split(repro)
        while tokens and "=" in tokens[0] and tokens[0].split("=", 1)[0].isidentifier():
            key, value = tokens.pop(0).split("=", 1)
            env[key] = value
        if "pytest" in " ".join(tokens[:3]):
            argv = tokens
            if argv[0] in ("python", "python3"):   # the portable repro's word for the interpreter
                argv = [sys.executable, *argv[1:]]
    if not argv:
        if not device:
            raise NotRerunnable(record["test_id"], "no repro command recorded and the build names no device")
        argv = [sys.executable, "-m", "pytest", record["test_id"], "--tc-device", device]
        if profile:
            argv += ["--tc-profile", profile]
    # One process, no cache writes, no xdist even if the project's addopts ask for it.
    return env, argv + ["-p", "no:cacheprovider", "-p", "no:xdist", "-q"]


def run_attempt(record: dict, attempt: int, device: str = "", profile: str = "", timeout: float = 600,
                cwd: str | None = None) -> Outcome:
    """Run one attempt of one test and return its classified Outcome (attempt set)."""
    extra_env, argv = rerun_command(record, device, profile)
    env = rerun_env(extra_env)
    if cwd is None:
        cwd = _repro_root(argv)
    with tempfile.TemporaryDirectory(prefix="tc-rerun-") as tmp:
        jsonl = os.path.join(tmp, "outcomes.jsonl")
        argv = argv + ["--tc-jsonl", jsonl]
        try:
            proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return _synthetic(record, attempt, TIMEOUT, f"rerun exceeded {timeout:g} s")
        except OSError as exc:
            return _synthetic(record, attempt, CRASH, f"rerun could not start: {exc}")
        found = _read_outcome(jsonl, record["test_id"])
    if found is None:
        # No record: the process died before the plugin wrote one, or the test
        # id no longer collects.  Either way not a pass.
        tail = bound_message(" ".join(proc.stdout.strip().splitlines()[-1:]) if proc.stdout else "")
        return _synthetic(record, attempt, CRASH,
                          f"rerun exited {proc.returncode} without an outcome for the test: {tail}")
    found.attempt = attempt
    return found


def _repro_root(argv: list[str]) -> str | None:
    """Where a recorded repro runs: the runner writes its paths relative to the torchconform
    checkout (collectors/repro.py: the site is public, so no path of the machine), so the
    rerun starts there when the test's file is found there; else in the current folder."""
    root = checkout_root()
    for token in argv:
        if "::" in token or token.endswith(".py"):
            path = token.partition("::")[0]
            if not os.path.isabs(path) and os.path.exists(os.path.join(root, path)) and not os.path.exists(path):
                return root
            break
    return None


def _read_outcome(path: str, test_id: str) -> Outcome | None:
    if not os.path.exists(path):
        return None
    wanted, only = None, None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if data.get("type", "outcome") != "outcome":
                continue
            data.pop("type", None)
            o = Outcome.from_dict(data)
            only = o
            # The repro names the file by absolute path, so the rerun's test id
            # may differ in its path part from the stored one.
            if o.test_id == test_id or o.test_id.endswith("::" + test_id.split("::", 1)[-1]):
                wanted = o
    return wanted or only


def _synthetic(record: dict, attempt: int, outcome: str, message: str) -> Outcome:
    return Outcome(test_id=record["test_id"], outcome=outcome, message=message, attempt=attempt,
                   device=record.get("device", ""), repro=record.get("repro", ""))


# -- confirming and storing ------------------------------------------------------------------
def confirm(records: Iterable[dict], reruns: int, runner: Callable[[dict, int], Outcome],
            first_attempt: Callable[[str], int] = lambda tid: 2,
            on_attempt: Callable[[Outcome], None] = lambda o: None) -> list[Confirmation]:
    """Rerun each record ``reruns`` times (all of them: every attempt is evidence
    for the flake rate), numbering attempts from ``first_attempt(test_id)``."""
    out = []
    for rec in records:
        conf = Confirmation(rec["test_id"], first=(f"{rec['outcome']}/{rec['kind']}" if rec.get("kind")
                                                   else rec["outcome"]))
        start = first_attempt(rec["test_id"])
        for i in range(reruns):
            o = runner(rec, start + i)
            o.test_id = rec["test_id"]   # store under the original identity
            for key in ("suite", "file", "cls", "name", "op", "variant", "dtype"):
                if rec.get(key):
                    setattr(o, key, rec[key])
            on_attempt(o)
            conf.attempts.append(Attempt(o.attempt, o))
        out.append(conf)
    return out


def next_attempt(store, build: str, test_id: str) -> int:
    """1 + the highest attempt already stored for the test in the build."""
    attempts = [h["attempt"] for h in read_changes.test_history(store, test_id) if h["build"] == build]
    return max(attempts, default=1) + 1


def stored_flaky(store, build: str) -> dict[str, dict]:
    """Tests already confirmed flaky in ``build`` by an earlier gate run: {test_id: entry}."""
    return {f["test_id"]: f for f in read_changes.flaky_tests(store, build=build) if f["flaky"]}


def confirm_and_store(store, build: str, records: list[dict], reruns: int, device: str = "", profile: str = "",
                      timeout: float = 600, cwd: str | None = None) -> list[Confirmation]:
    """Rerun ``records`` and store every attempt in ``build`` (one run, suite gate-rerun)."""
    if not records or reruns <= 0:
        return []
    run_id = store.start_run(build, suite=RERUN_SUITE, selection=" ".join(r["test_id"] for r in records),
                             command=" ".join(shlex.quote(a) for a in sys.argv))
    status = 1
    try:
        confs = confirm(records, reruns,
                        runner=lambda rec, n: run_attempt(rec, n, device, profile, timeout, cwd),
                        first_attempt=lambda tid: next_attempt(store, build, tid),
                        on_attempt=lambda o: store.add_outcomes(run_id, [o]))
        status = 0
    finally:
        store.finish_run(run_id, status)
    return confs
