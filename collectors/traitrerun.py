"""Verifying that a declared trait explains a failure: rerun it with the trait off.

The controller (collectors/controller.py) holds back each failure a declared trait
may explain (``traitfail.candidate_trait``), at most ``--tc-trait-reruns`` of them
(default 200; the rest are recorded at once as plain ``fail``).  When the session
ends it reruns them here, all in one fresh pytest process: the session's own
command line (same ini, plugins, rootdir, device and backend profile) less its test
paths, workers and sinks, plus the held tests' node ids, in the environment the
backend profile's ``trait_off`` hook gives (refdev: ``$TORCHCONFORM_REFDEV_PROFILE``
naming a copy of the active profile with the trait false).  A held test that passes
there is ``fail``/``trait:<name>``; one that fails again, or that the rerun never
reached (crash, timeout), stays plain ``fail``.  Without a hook the documented rule
decides at once (``traitfail.rule_reason``) and nothing is held.

Cost: one pytest start (torch, the backend, collecting the held tests' files) plus
the held tests' own time, serially; nothing per passing test.  A run interrupted
(SIGTERM, Ctrl-C) records the held failures as plain ``fail`` without rerunning; a
run killed outright loses them with the rest of its unflushed results.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from torchconform.core.outcome import PASSED, Outcome
from torchconform.collectors.traitfail import VIA_RERUN, VIA_RULE, attributed, candidate_trait, rule_reason
from torchconform.procs import rerun_env
from torchconform.collectors.sink_jsonl import read_jsonl
from torchconform.collectors.worker import _resolve

# Options of the session the rerun must not repeat: its sinks and build (the rerun writes its
# own JSON lines only), xdist (one process, serially), sharding (it would deselect the tests).
_DROP_VALUE = {"-n", "--numprocesses", "--maxprocesses", "--max-worker-restart", "--dist", "--tx",
               "--tc-jsonl", "--tc-junit", "--tc-db", "--tc-build", "--tc-shard", "--tc-trait-reruns",
               "--tc-sweep-shards", "--tc-sweep-shard", "--junitxml", "--junit-xml"}
_DROP_FLAG = {"--tc-sweep-resume", "--lf", "--last-failed", "--ff", "--failed-first", "--sw", "--stepwise",
              "-x", "--exitfirst"}
_DROP_PLUGINS = {"torchconform.sweep.pytest_shard", "xdist"}


def rerun_argv(invocation: list[str], positional: list[str], node_ids: list[str], jsonl: str) -> list[str]:
    """pytest argv that runs ``node_ids`` as the session did: its ``invocation`` arguments less
    its ``positional`` ones (test paths) and the options above, writing ``jsonl``."""
    paths, out, args, i = set(positional), [], list(invocation), 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if name in _DROP_VALUE:
            i += 1 if "=" in a else 2
            continue
        if a.startswith("-n") and len(a) > 2 and a[2:].isalnum():  # -n2, -nauto
            i += 1
            continue
        if a == "-p" and i + 1 < len(args) and args[i + 1] in _DROP_PLUGINS:
            i += 2
            continue
        if a in _DROP_FLAG or (a in paths and not a.startswith("-")):
            i += 1
            continue
        out.append(a)
        if a in ("-p", "-c", "-k", "-m", "-o", "--rootdir", "-W", "--tb", "--tc-device", "--tc-profile") \
                and i + 1 < len(args):
            out.append(args[i + 1])  # an option's value is never a test path, even when it looks like one
            i += 1
        i += 1
    return [sys.executable, "-m", "pytest", *out, *node_ids, "-p", "no:xdist", "-p", "no:cacheprovider",
            "--tc-jsonl", jsonl]


def _key(test_id: str) -> tuple[str, str]:
    """A test's identity whatever path prefix its file has (the rerun names files absolutely)."""
    file, _, rest = test_id.partition("::")
    return os.path.basename(file), rest


def passed_with_trait_off(trait: str, hook, invocation: list[str], positional: list[str],
                          node_ids: dict[str, str], timeout: float, cwd: str | None = None) -> set[str] | None:
    """Test ids of ``node_ids`` ({test_id: node id to run}) that pass in one pytest process with
    ``trait`` switched off by ``hook`` (the profile's trait_off); None when it cannot switch
    that trait off."""
    with tempfile.TemporaryDirectory(prefix="tc-trait-") as tmp:
        extra = hook(trait, tmp)
        if not extra:
            return None
        jsonl = os.path.join(tmp, "rerun.jsonl")
        # The rerun holds nothing back itself: its profile has the trait off anyway.
        env = rerun_env({**{str(k): str(v) for k, v in extra.items()}, "TORCHCONFORM_TRAIT_RERUNS": "0"})
        argv = rerun_argv(invocation, positional, list(node_ids.values()), jsonl)
        try:
            subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            pass  # what the rerun recorded before it was stopped still counts
        _, outcomes = read_jsonl(jsonl) if os.path.exists(jsonl) else ({}, [])
    passed = {_key(o.test_id) for o in outcomes if o.outcome in PASSED}
    return {tid for tid in node_ids if _key(tid) in passed}


class TraitAttribution:
    """The controller's part: which failures to hold, and what they are once the session ends."""

    def __init__(self, profile, limit: int):
        self.policy = profile.dtype_policy or {}
        self.hook = _resolve(profile.trait_off)
        self.limit = limit
        self.held: list[tuple[Outcome, str, str]] = []   # (outcome, trait, node id to run)
        self.stats = {"candidates": 0, "rerun": 0, "attributed": 0, "by_rule": 0, "not_rerun": 0}

    def take(self, o: Outcome, mismatch: dict | None, node_id: str) -> Outcome | None:
        """``o`` as it is to be recorded now, or None when it is held for the rerun."""
        found = candidate_trait(o, mismatch, self.policy)
        if found is None:
            return o
        trait, lower = found
        self.stats["candidates"] += 1
        if self.hook is None:
            reason = rule_reason(mismatch, lower)
            if reason is None:
                return o
            self.stats["by_rule"] += 1
            return attributed(o, trait, f"{VIA_RULE}: {reason}")
        if len(self.held) >= self.limit:
            self.stats["not_rerun"] += 1
            return o
        self.held.append((o, trait, node_id))
        return None

    def resolve(self, config, interrupted: bool, per_test_timeout: float) -> list[Outcome]:
        """The held outcomes, each attributed when its rerun with the trait off passed."""
        held, self.held = self.held, []
        if not held or interrupted:
            self.stats["not_rerun"] += len(held)
            return [o for o, _, _ in held]
        invocation = [str(a) for a in config.invocation_params.args]
        positional = [str(a) for a in config.args]
        out = []
        for trait in sorted({t for _, t, _ in held}):
            group = [(o, node) for o, t, node in held if t == trait]
            timeout = 120 + len(group) * (per_test_timeout or 600)
            passed = passed_with_trait_off(trait, self.hook, invocation, positional,
                                           {o.test_id: node for o, node in group}, timeout,
                                           cwd=str(config.invocation_params.dir))
            self.stats["rerun"] += len(group) if passed is not None else 0
            for o, _ in group:
                if passed and o.test_id in passed:
                    self.stats["attributed"] += 1
                    o = attributed(o, trait, VIA_RERUN)
                out.append(o)
        return out
