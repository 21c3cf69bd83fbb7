"""The distributed suite and refdev's c10d backend (issue 15): classification of what a
device lacks, the acceptance on refdev profiles and CPU, and no process left behind
after a crash, a hang, a failure or a kill -9 of the run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from torchconform.core.classify import classify_text
from torchconform.core.profile import load_profile
from tests.support import child_env

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "distributed"
TC = [sys.executable, "-m", "torchconform"]
RANK_MODULE = "torchconform.suites.distributed.rank"


# -- classification ---------------------------------------------------------------------
@pytest.mark.parametrize("text,kind,name", [
    ("AssertionError: rank 0 of 2: RuntimeError: refccl does not implement the all_to_all collective "
     "(profile young-backend)", "missing_collective", "all_to_all"),
    ("RuntimeError: Backend fancy does not support alltoall_base", "missing_collective", "all_to_all"),
    ("RuntimeError: Backend fancy does not support allgather_into_tensor_coalesced", "missing_collective",
     "all_gather"),
    ("RuntimeError: torchconform missing c10d backend: neuron (no c10d backend for this device type)",
     "missing_c10d_backend", "neuron"),
    ("RuntimeError: torchconform missing device api: torch.refdev.Stream (the distributed APIs need it)",
     "missing_device_api", "torch.refdev.Stream"),
])
def test_missing_distributed_pieces_are_backend_skips(text, kind, name):
    v = classify_text(text, load_profile("refdev"), status="failure")
    assert (v.outcome, v.kind, v.missing_op) == ("skip_backend", kind, name)


def test_refccl_words_are_refdev_only():
    """refccl's message belongs to the refdev profile's patterns: on another profile it is a failure."""
    text = "RuntimeError: refccl does not implement the all_to_all collective (profile young-backend)"
    assert classify_text(text, load_profile("cuda")).outcome == "fail"


def test_rank_death_and_hang_words():
    assert classify_text("AssertionError: torchconform crash: rank 1 of 2 died (killed by SIGSEGV)").outcome == "crash"
    assert classify_text("AssertionError: torchconform timeout: x: rank(s) 0 of 2 did not finish").outcome == "timeout"


def test_profile_distributed_section_checked(tmp_path):
    from torchconform.errors import UserError

    bad = tmp_path / "profile.yaml"
    bad.write_text("device: refdev\ndistributed:\n  missing_collective_patterns: ['no group here']\n")
    with pytest.raises(UserError, match=r"needs a \(\?P<collective>"):
        load_profile(bad)
    bad.write_text("device: refdev\ndistributed:\n  ranks: 2\n")
    with pytest.raises(UserError, match="unknown key"):
        load_profile(bad)


def test_refdev_profile_collectives_checked(tmp_path):
    from torchconform.errors import UserError
    from torchconform.refdev import profiles

    bad = tmp_path / "p.yaml"
    bad.write_text("name: p\ncollectives:\n  missing: [alltoall]\n")
    with pytest.raises(UserError, match="'collectives.missing' entry 'alltoall' is not one of"):
        profiles.load_profile(str(bad))
    assert profiles.load_profile("young-backend").missing_collectives == ["all_to_all"]
    assert profiles.load_profile("young-backend").synchronous_collectives is True
    assert profiles.load_profile("full").missing_collectives == []


def test_describe_lists_collectives():
    out = subprocess.run(TC + ["refdev", "describe", "--profile", "young-backend", "--json"], env=child_env(),
                         capture_output=True, text=True, timeout=300, check=True)
    info = json.loads(out.stdout)
    assert info["collectives"]["c10d_backend"] == "refccl"
    assert info["collectives"]["status"]["all_to_all"] == "missing"
    assert info["collectives"]["status"]["all_reduce"] == "implemented"
    assert info["expected_traits"]["overlap.overlaps"] is False


# -- refdev's device module for the distributed APIs -------------------------------------
def test_refdev_streams_events_and_alias():
    code = """
import time, torch
from torchconform import refdev
d = refdev.load(); m = torch.refdev
s = m.Stream()
assert s.stream_id != 0 and m.current_stream().stream_id == 0
with m.stream(s):
    assert m.current_stream().stream_id == s.stream_id
assert m.current_stream().stream_id == 0 and m.default_stream().stream_id == 0
a, b = m.Event(enable_timing=True), m.Event(enable_timing=True)
a.record(); time.sleep(0.05); b.record()
assert 40 < a.elapsed_time(b) < 5000, a.elapsed_time(b)
x = torch.arange(6., device=d).reshape(2, 3)
c = refdev._extension().cpu_alias(x.t())
assert c.device.type == 'cpu' and c.stride() == x.t().stride()
c.add_(1)   # the alias writes the device's own bytes
assert x.cpu().tolist() == [[1., 2., 3.], [4., 5., 6.]]
print('ok')
"""
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


# -- the suite end to end ----------------------------------------------------------------
def _run_suite(tmp_path, device: str, keyword: str, *extra) -> dict:
    jsonl = tmp_path / f"{device}-{uuid.uuid4().hex[:6]}.jsonl"
    args = ["run", "--suite", "distributed", "--device", device, "-n", "0", "--no-db", "--jsonl", jsonl,
            "-k", keyword, *extra]
    proc = subprocess.run(TC + [str(a) for a in args], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    return {r["name"]: r for r in records if "test_id" in r}


SAMPLE = "(all_to_all and tensor-float32) or (all_reduce and c10d-float32) or (redistribute and shard_1) or overlap or ddp"


@pytest.mark.slow
def test_young_backend_lacks_all_to_all_and_never_overlaps(tmp_path):
    got = _run_suite(tmp_path, "refdev", SAMPLE, "--refdev-profile", "young-backend")
    a2a = got["test_collective_all_to_all[tensor-float32]"]
    assert (a2a["outcome"], a2a["kind"], a2a["missing_op"], a2a["op"]) == \
        ("skip_backend", "missing_collective", "all_to_all", "all_to_all")
    # DTensor's shard-to-shard redistribute is an all_to_all underneath: skipped, naming it
    s2s = got["test_dtensor_redistribute[dtensor-shard_0->shard_1]"]
    assert (s2s["outcome"], s2s["missing_op"]) == ("skip_backend", "all_to_all")
    for name in ("test_collective_all_reduce[c10d-float32]", "test_ddp[ddp-steps]", "test_ddp[ddp-no_sync]"):
        # passed on the device: the ranks touched it, so not host_only
        assert (got[name]["outcome"], got[name]["kind"]) == ("pass", ""), got[name]
    assert got["test_collective_all_reduce[c10d-float32]"]["dtype"] == "float32"
    overlap = got["test_overlap[overlap]"]
    assert overlap["outcome"] == "pass"
    from torchconform.core.traitnotes import parse_trait_note
    name, body = parse_trait_note(overlap["message"])
    assert name == "overlap" and body["overlaps"] is False and body["fraction"] == 0.0


@pytest.mark.slow
def test_full_profile_and_cpu_pass(tmp_path):
    # a sample in CI (each test starts its ranks: seconds); the whole suite: bench/distributed.py
    keyword = "(all_to_all and tensor-float32) or (redistribute and shard_1) or (fsdp and True) or tensor_parallel"
    for device, extra in (("refdev", ("--refdev-profile", "full")), ("cpu", ())):
        got = _run_suite(tmp_path, device, keyword, *extra)
        assert len(got) == 4, sorted(got)
        assert {r["outcome"] for r in got.values()} == {"pass"}, {n: r["message"] for n, r in got.items()}


# -- no process left behind ----------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _pids(folder: Path) -> list[int]:
    return [int(p.read_text()) for p in folder.iterdir() if p.read_text().strip()]


def _launch(program: str, pids: Path, timeout: float, token: str = ""):
    from torchconform.suites.distributed import launch

    env = {"TORCHCONFORM_DEVICE": "cpu", "TORCHCONFORM_PROFILE": "cpu",
           "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    if token:
        env[token] = "1"
    return launch.run_ranks(f"fx_rank_programs:{program}", {"pids": str(pids)}, size=2, timeout=timeout,
                            extra_env=env)


# The rank timeout counts from the launch, a rank's start-up (import torch, rendezvous) included,
# which takes many seconds on a loaded machine: the crash and the failure get a timeout they never
# need, so that their verdict does not depend on load; the hang's verdict is a timeout at any speed.
@pytest.mark.parametrize("program,outcome,words,timeout", [
    ("crash", "crash", "rank 1 of 2 died (killed by SIGSEGV)", 300),
    ("hang", "timeout", "did not finish within 20 s", 20),
    ("fails", "fail", "rank 0 found a wrong result", 300),
])
def test_rank_failures_kill_every_rank(tmp_path, program, outcome, words, timeout):
    from torchconform.suites.distributed.launch import RankFailure

    pids = tmp_path / "pids"
    pids.mkdir()
    token = f"TC_DIST_TEST_{uuid.uuid4().hex}"
    with pytest.raises(RankFailure) as info:
        _launch(program, pids, timeout=timeout, token=token)
    assert words in str(info.value)
    assert classify_text(str(info.value), load_profile("cpu")).outcome == outcome
    started = _pids(pids)
    assert not [p for p in started if _alive(p)] and not _rank_processes(token)
    # the crash and the failure wait for their peer's start; a hang may time out before either started
    if program != "hang":
        assert len(started) == 2, started


def _rank_processes(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:  # gone, or not ours to read
            continue
        if RANK_MODULE.encode() in cmdline and token.encode() in environ and _alive(int(entry)):
            found.append(int(entry))
    return found


@pytest.mark.slow
def test_kill_9_of_the_run_leaves_no_rank(tmp_path):
    """kill -9 of ``torchconform run`` while ranks run: pytest dies with it, its ranks with it."""
    token = f"TC_DIST_TEST_{uuid.uuid4().hex}"
    env = child_env(**{token: "1"})
    proc = subprocess.Popen(TC + ["run", "--suite", "distributed", "--device", "refdev", "-n", "0", "--no-db",
                                  "-k", "overlap or ddp or fsdp"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not _rank_processes(token) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert _rank_processes(token), "no rank process ever started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 60
    while _rank_processes(token) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _rank_processes(token)


@pytest.mark.slow
def test_gate_and_summary_see_a_distributed_regression(tmp_path):
    """Build a (refdev full) then b (young-backend, no all_to_all): the gate fails b on the
    all_to_all test that went missing, and summary --by suite counts the distributed suite."""
    db = tmp_path / "results.db"
    keyword = "(all_to_all and tensor-float32) or (all_reduce and c10d-float32)"
    for build, profile in (("a", "full"), ("b", "young-backend")):
        proc = subprocess.run(TC + ["run", "--suite", "distributed", "--device", "refdev", "--refdev-profile", profile,
                                    "-n", "0", "--db", str(db), "--build", build, "--branch", "main", "-k", keyword],
                              cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=900)
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
    gate = subprocess.run(TC + ["gate", "--build", "b", "--baseline", "a", "--db", str(db), "--reruns", "0", "--json"],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert gate.returncode == 1, gate.stdout[-2000:] + gate.stderr[-2000:]
    verdict = json.loads(gate.stdout)
    regression = next(r for r in verdict["rules"] if r["rule"] == "regression")
    assert regression["status"] == "fail"
    assert [(f["test_id"].split("::")[-1], f["new"]) for f in regression["findings"]] == \
        [("test_collective_all_to_all[tensor-float32]", "skip_backend/missing_collective")]
    summary = subprocess.run(TC + ["summary", "--build", "b", "--db", str(db), "--by", "suite", "--json"],
                             cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300, check=True)
    by_suite = json.loads(summary.stdout)
    dist = by_suite["distributed"] if isinstance(by_suite, dict) else next(b for b in by_suite if b.get("suite") == "distributed")
    assert dist["outcomes"]["pass"] == 1 and dist["backend_skip_kinds"]["missing_collective"] == 1
