"""A worker that cannot start (a device it cannot see, a backend that will not load)
ends the run with its own error, instead of being replaced up to --max-worker-restart
times (on a one-GPU machine every worker but the first was pinned to a GPU it could not
see, and the run spun replacing them for its whole time limit)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, child_env, run_pytest  # noqa: E402


def test_workers_failing_at_start_up_end_the_run_with_their_error(tmp_path):
    proc, _, outcomes = run_pytest(["-p", "fx_worker_cannot_start", FIXTURES / "fx_outcomes.py", "--tc-device", "cpu",
                                    "-n", "2", "--max-worker-restart", "1000"], tmp_path,
                                   env=child_env(PYTHONPATH=str(FIXTURES)), check_rc=None, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and outcomes == []
    assert "xdist workers fail at start-up: " in text and "this worker cannot see its device" in text, text[-3000:]
    # stopped at the second death, not after a thousand replacements
    assert text.count("node down:") <= 3, text[-3000:]


def test_a_worker_is_pinned_modulo_the_host_device_count(monkeypatch):
    from torchconform.core import device
    from torchconform.core.profile import load_profile

    profile = load_profile("cuda")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("TORCHCONFORM_DEVICES_PER_HOST", "2")
    device.pin_worker(profile)
    assert device.os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.delenv("TORCHCONFORM_DEVICES_PER_HOST")
    monkeypatch.setattr(device, "_host_device_count", lambda var: 1)   # one GPU: everyone on 0
    device.pin_worker(profile)
    assert device.os.environ["CUDA_VISIBLE_DEVICES"] == "0"
