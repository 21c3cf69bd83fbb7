"""The Ray engine gives the same outcomes as the local engine (local Ray instance)."""
import os

import pytest

ray = pytest.importorskip("ray", reason="extra ray: pip install 'torchconform[ray]'")
pytestmark = pytest.mark.usefixtures("one_ray_at_a_time")
pytest.importorskip("transformers", reason="extra zoo: pip install 'torchconform[zoo]'")

from torchconform.sweep.driver import SweepOptions, run_sweep  # noqa: E402
from torchconform.errors import UserError  # noqa: E402
from torchconform.sweep.ray_engine import RayEngine, required_resources, task_options  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "zoo", "faulty.py")


def test_one_device_per_task():
    assert task_options("neuron")["resources"] == {"neuron_cores": 1}
    assert task_options("cuda")["num_gpus"] == 1
    assert "num_gpus" not in task_options("refdev") and task_options("refdev")["num_cpus"] == 1


def test_a_cluster_without_the_device_resource_is_refused_at_once():
    class Cluster:  # what ray.cluster_resources() says of a CPU-only cluster
        @staticmethod
        def cluster_resources():
            return {"CPU": 8.0, "memory": 1e10}

    assert required_resources("cuda") == {"CPU": 1, "GPU": 1}
    assert required_resources("neuron") == {"CPU": 1, "neuron_cores": 1}
    RayEngine(device="refdev")._check_resources(Cluster)  # CPU is all refdev asks for
    for device, missing in (("cuda", "'GPU'"), ("neuron", "'neuron_cores'")):
        with pytest.raises(UserError, match=f"has no {missing} resource"):
            RayEngine(address="head:6379", device=device)._check_resources(Cluster)


def test_ray_engine_matches_local_engine(tmp_path):
    selection = tmp_path / "models.txt"
    selection.write_text("\n".join(["hf/bert", "hf/roberta", "hf/llama", f"py/{FIXTURE}::healthy"]) + "\n")
    common = dict(selection=str(selection), device="refdev", db=str(tmp_path / "r.db"),
                  variants=("eval", "train"), progress_stream=open(os.devnull, "w"))
    local = run_sweep(SweepOptions(build="local", workers=1, devices=1, **common))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_sweep(SweepOptions(build="ray", engine="ray", workers=2, **common))
    finally:
        ray.shutdown()

    def key(report):
        return sorted((o.test_id, o.outcome, o.kind, o.missing_op, tuple(o.fallback_ops)) for o in report.outcomes)

    assert key(local) == key(remote)
    assert len(remote.outcomes) == 8
