"""The CLI as a daily tool (issue 18): `builds` shows whole names and counts that say what
they count; a refdev profile passed where a backend profile goes says which flag to use."""
import json
import subprocess
import sys

from torchconform.core.outcome import Outcome
from torchconform.db.opening import open_store

TC = [sys.executable, "-m", "torchconform"]
LONG = "refdev-young-backend-20261201T180359.883242Z-05191"


def test_builds_shows_whole_names_and_tests_apart_from_stored_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with open_store(url) as store:
        store.ensure_build(LONG, device="refdev")
        for attempt in (1, 2):   # the same test stored twice: a rerun, or an ingest --append
            run = store.start_run(LONG, suite="ops")
            store.add_outcomes(run, [Outcome(test_id="t.py::test_a", outcome="pass", suite="ops", attempt=attempt),
                                     Outcome(test_id=f"t.py::test_{attempt}", outcome="fail", suite="ops")])
            store.finish_run(run, 0)
    out = subprocess.run(TC + ["builds", "--db", url], capture_output=True, text=True, check=True).stdout
    header, row = out.splitlines()[:2]
    assert LONG in row.split()
    cells = dict(zip(["build", "created", "device", "runs", "tests", "stored", "state"], row.split()))
    assert (cells["runs"], cells["tests"], cells["stored"]) == ("2", "3", "4")
    assert "stored results" in header and "what `summary` counts" in out
    data = json.loads(subprocess.run(TC + ["builds", "--db", url, "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    assert (data[0]["tests"], data[0]["results"]) == (3, 4)


def test_a_refdev_profile_given_as_backend_profile_says_which_flag(tmp_path):
    proc = subprocess.run(TC + ["run", "--profile", "full", "--no-db"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "--refdev-profile full" in proc.stderr and "Traceback" not in proc.stderr
    out = subprocess.run(TC + ["refdev", "describe", "--refdev-profile", "full", "--json"], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert json.loads(out)["profile"] == "full"


def test_every_build_records_its_environment(tmp_path):
    """Issue 16: the environment a run had is stored on its build, whatever the suite."""
    import os

    url = f"sqlite:///{tmp_path / 'r.db'}"
    subprocess.run(TC + ["run", "--ops", "abs", "-k", "compare_cpu_abs_refdev_float32", "-n", "0", "--db", url,
                         "--build", "env"], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=True)
    builds = json.loads(subprocess.run(TC + ["builds", "--db", url, "--json"], capture_output=True, text=True,
                                       check=True).stdout)
    env = builds[0]["metadata"]["environment"]
    assert env["cpu_count"] == os.cpu_count() and env["device"] == "refdev"
    assert env["torch"].startswith("2.") and "torchconform run --ops abs" in env["launch"]
    assert env["cpu_affinity"] and env["os"].split()[0] == "Linux"
