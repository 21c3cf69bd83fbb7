"""`torchconform run` keeps the terminal short (issue 18): a progress display and the
breakdown, pytest's own output in a log file whose path it prints, `-v` streaming it
as before; and the numbers it shows agree with the outcome records."""
import io
import json
import os
import pty
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from support import child_env
from torchconform.core.outcome import FAILED, PASSED, SKIPPED, XFAIL, XPASS, Outcome

TC = [sys.executable, "-m", "torchconform"]
SMALL = ["run", "--ops", "abs", "-n", "0", "--no-db"]
# What `run` may print for a small selection: header, log path, progress, breakdown (about 12), records.
MOST_LINES = 25
# pytest's closing counts line (under -q): "1 failed, 7 passed in 14.19s"
CLOSING = r"^(\d+ [a-z]+, )*\d+ [a-z]+ in [\d.]+s"


def tc(*args, cwd, timeout=600):
    return subprocess.run([*TC, *map(str, args)], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=timeout)


def records(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("type") == "outcome"]


def classes(recs) -> dict:
    counts = Counter(r["outcome"] for r in recs)
    return {"passed": sum(counts[o] for o in PASSED), "failed": sum(counts[o] for o in FAILED),
            "skipped": sum(counts[o] for o in SKIPPED), "xfail": counts[XFAIL], "xpass": counts[XPASS]}


def printed_path(stderr: str, what: str) -> Path:
    m = re.search(rf"^torchconform: {what}: (\S+)", stderr, re.M)
    assert m, stderr
    return Path(m.group(1))


@pytest.fixture(scope="module")
def quiet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quiet")
    return tmp, tc(*SMALL, "--build", "quiet", cwd=tmp)


def test_a_run_prints_a_few_lines_and_keeps_pytest_output_in_a_log(quiet):
    tmp, proc = quiet
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len((proc.stdout + proc.stderr).splitlines()) <= MOST_LINES, proc.stdout + proc.stderr
    log = printed_path(proc.stderr, "pytest's own output")
    assert log == tmp / ".torchconform" / "runs" / "quiet.log"
    text = log.read_text()
    # pytest's progress and its closing counts line are in the log, not on the terminal
    closing = re.search(CLOSING, text, re.M)
    assert closing, text[-2000:]
    assert closing.group(0) not in proc.stderr + proc.stdout
    assert "pytest's own counts" not in proc.stderr   # nothing of pytest's to warn about here


def test_the_numbers_shown_are_the_records_counts(quiet):
    tmp, proc = quiet
    recs = records(tmp / ".torchconform" / "runs" / "quiet.jsonl")
    want = classes(recs)
    assert f"build quiet: {len(recs)} outcomes" in proc.stdout
    for name in ("passed", "failed", "skipped"):
        assert re.search(rf"^  {name}\s+{want[name]}\b", proc.stdout, re.M), (name, want, proc.stdout)
    # the progress display's last line (piped: a plain line) says the same; a slow (loaded)
    # run prints more plain lines before it, at growing intervals, so only the last is judged
    shown_lines = [ln for ln in proc.stderr.splitlines() if re.match(r"\d+/\d+ tests ", ln)]
    assert shown_lines, proc.stderr
    line = shown_lines[-1]
    assert line.startswith(f"{len(recs)}/{len(recs)} tests "), line
    assert not [ln for ln in shown_lines[:-1] if re.search(r"  in [\d:]+$", ln)], shown_lines   # one final line
    counts = line.split("  ")[1]   # "8/8 tests  passed 7 skipped 1  in 0:37"
    shown = {k: int(v) for k, v in re.findall(r"([a-z]+) (\d+)", counts)}
    assert shown == {k: n for k, n in want.items() if n}, (line, want)


def test_verbose_streams_pytest_output_as_before(tmp_path):
    proc = tc(*SMALL, "--build", "loud", "-v", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(CLOSING, proc.stderr, re.M), proc.stderr[-3000:]
    assert "torchconform's classification (pytest's own counts above treat backend skips as failures)" in proc.stderr
    assert not re.search(r"^\d+/\d+ tests ", proc.stderr, re.M)   # no progress display over the stream
    log = printed_path(proc.stderr, "pytest's own output")
    assert re.search(CLOSING, log.read_text(), re.M)   # kept in the log as well


def test_pytest_ending_early_shows_the_end_of_its_output(tmp_path):
    proc = tc(*SMALL, "--build", "bad", "--", "--no-such-pytest-option", cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("torchconform: error: pytest exited with status 4 before recording anything")
    assert "bad.log" in lines[-1]
    assert "unrecognized arguments: --no-such-pytest-option" in proc.stderr   # from the log's tail
    assert len(lines) <= MOST_LINES


def test_no_torch_trace_debug_lines_in_a_failure_report():
    import argparse

    from torchconform.cli import cmd_run

    parser = argparse.ArgumentParser()
    cmd_run.register(parser.add_subparsers())
    cmd = cmd_run.build_command(parser.parse_args(["run", "--device", "cpu"]), "b", "/tmp/x.jsonl", None)
    assert cmd[cmd.index("--log-disable") + 1] == "torch.__trace"


def test_a_quiet_run_still_shows_torchconforms_own_report_sections():
    from torchconform.cli.run_child import _Shown

    shown = _Shown()
    lines = ["....F.s  [7/7]", "=================== FAILURES ===================", "E   AssertionError",
             "======= torchconform skiplist: proposed removals =======",
             "x.yaml::neg-int: its test passed (1 xpass, e.g. t); remove the entry",
             "1 failed, 5 passed, 1 xpassed in 3.20s", "torchconform: warning: for the user"]
    assert [line for line in lines if shown(line)] == lines[3:5] + lines[6:]


# -- the progress display ------------------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self):
        return True


def _outcome(outcome):
    return Outcome(test_id=f"t{outcome}", outcome=outcome)


def test_progress_off_a_terminal_is_a_line_per_interval_and_one_at_the_end():
    from torchconform.sweep.progress import Progress, class_counts

    out = io.StringIO()
    p = Progress(None, stream=out, interval=3600, unit="tests", describe=class_counts)
    p.set_total(5)
    p.add(["pass", "pass_fallback", "skip_backend"])
    assert out.getvalue() == ""   # within the interval: nothing yet
    p.sync(["pass", "pass_fallback", "skip_backend", "fail"])
    p.close()
    (line,) = out.getvalue().splitlines()
    assert line.startswith("4/5 tests  passed 2 failed 1 skipped 1  stopped after ")


def test_progress_on_a_terminal_is_a_bar_left_as_one_line():
    from torchconform.sweep.progress import Progress, class_counts

    out = Terminal()
    p = Progress(None, stream=out, interval=0, unit="tests", describe=class_counts)
    p.set_total(3)
    p.add(["pass", "xfail", "error"])
    p.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert text.count("\n") == 1 and "3/3 tests  passed 1 failed 1 xfail 1  in " in text


def test_progress_that_saw_nothing_leaves_nothing():
    from torchconform.sweep.progress import Progress

    for stream in (io.StringIO(), Terminal()):
        p = Progress(None, stream=stream, interval=0, unit="tests")
        p.close(final=False)
        assert stream.getvalue() == ""


def test_run_on_a_pseudo_terminal_draws_in_place(tmp_path):
    """stderr a terminal (stdout piped): the bar redraws without new lines; the whole stays short."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*TC, *SMALL, "--build", "tty"], cwd=tmp_path, env=child_env(TERM="xterm"),
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:   # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read()
    assert proc.wait(timeout=600) == 0
    os.close(master)
    err = b"".join(chunks).decode(errors="replace")
    assert err.count("\n") + out.count("\n") <= MOST_LINES, err
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    assert re.search(r"\d+/\d+ tests  passed \d+", plain)


def test_stopping_a_progress_display_that_never_started_leaves_the_real_error_alone(tmp_path):
    """If pytest cannot start (its log cannot be opened), the run's error propagates through
    ``progress.stop()``; a stop before any start must not raise an error of its own instead."""
    from torchconform.cli.run_progress import RunProgress

    progress = RunProgress(str(tmp_path / "run.jsonl"))
    progress.stop()
    assert progress.follow.stopped.is_set() and not progress.follow.is_alive()
