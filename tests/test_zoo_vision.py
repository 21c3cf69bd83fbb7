"""torchvision and timm builders (suites/models/vision.py) on a small sample.

Needs the vision environment (``make vision-test`` builds .venv-vision: torch 2.14.1 with
torchvision and timm); in the main environment every test here skips.  One model per
torchvision task and three timm models: each builds, its inputs have its task's form,
and a CPU sweep (eval, train) classifies each, models that must not build included.
About 75 s on 2 busy cores (up to 100 s at a load average of 6), most of it the sweep's
worker start and its detection and video models.
"""
import os

import pytest

pytest.importorskip("torchvision", reason="extra vision: make vision-test (its own venv, torch 2.14.1)")
pytest.importorskip("timm", reason="extra vision: make vision-test (its own venv, torch 2.14.1)")

import torch  # noqa: E402

from torchconform.core.outcome import PASS, SKIP_ELIGIBILITY  # noqa: E402
from torchconform.suites.models import catalog, vision  # noqa: E402
from torchconform.suites.models.spec import Unbuildable  # noqa: E402

# One per torchvision task (the smallest of each that exercises the task's input form)...
TV_SAMPLE = {
    "classification": "mobilenet_v3_small",
    "detection": "fasterrcnn_mobilenet_v3_large_320_fpn",
    "segmentation": "lraspp_mobilenet_v3_large",
    "video": "mc3_18",
    "optical_flow": "raft_small",
}
# ...and timm: a CNN (no img_size argument), a ViT (position embedding shrunk through
# img_size) and a hierarchical transformer.
TIMM_SAMPLE = ("resnet10t", "vit_tiny_patch16_224", "test_convnext")


@pytest.mark.parametrize("task", sorted(TV_SAMPLE))
def test_torchvision_inputs_follow_the_task(task):
    name = TV_SAMPLE[task]
    assert vision.torchvision_task(name) == task
    built = vision.build_torchvision(name)
    assert built.extra["task"] == task and built.parameters > 0
    inputs = built.inputs
    if task == "detection":
        # A list of 3-D images of different sizes, one target per image.
        images, targets = inputs["images"], inputs["targets"]
        assert isinstance(images, list) and all(img.dim() == 3 for img in images)
        assert len({img.shape for img in images}) > 1 and len(targets) == len(images)
        for img, target in zip(images, targets):
            boxes = target["boxes"]
            assert boxes.shape[1] == 4 and (boxes[:, 2:] > boxes[:, :2]).all()
            assert (boxes[:, 2] <= img.shape[-1]).all() and (boxes[:, 3] <= img.shape[-2]).all()
            assert target["labels"].dtype == torch.int64 and (target["labels"] >= 1).all()
    elif task == "optical_flow":
        assert inputs["image1"].dim() == 4 and inputs["image1"].shape == inputs["image2"].shape
        assert isinstance(inputs["num_flow_updates"], int)
    else:
        (x,) = inputs.values()
        assert x.dim() == (5 if task == "video" else 4) and x.shape[0] >= 2  # train-mode batch norm


def test_detection_eval_gives_detections_and_train_gives_losses():
    from torchconform.suites.models.check import run_eval, run_train

    built = vision.build_torchvision(TV_SAMPLE["detection"])
    evaluated = run_eval(built.model, built.inputs)
    assert any(key.endswith(".boxes") for key in evaluated) and any(key.endswith(".labels") for key in evaluated)
    trained = run_train(built.model, built.inputs)
    assert trained["loss"].dim() == 0 and any(key.startswith("grad.") for key in trained)


def test_timm_models_are_shrunk():
    cnn = vision.build_timm("resnet10t")
    assert cnn.model.num_classes == 10 and cnn.extra["img_size"] is None
    assert cnn.inputs["x"].shape == (2, 3, 64, 64)
    vit = vision.build_timm("vit_tiny_patch16_224")
    assert vit.extra["img_size"] == 64 and vit.inputs["x"].shape == (2, 3, 64, 64)


def test_models_that_cannot_be_built_say_why(monkeypatch):
    with pytest.raises(Unbuildable, match="quantized"):
        vision.build_torchvision("quantized_resnet18")
    with pytest.raises(Unbuildable, match="too large: .* parameters"):
        vision.build_torchvision("regnet_y_128gf")  # counted on meta: no memory spent
    with pytest.raises(Unbuildable, match="not in torchvision.models.list_models"):
        vision.build_torchvision("no_such_model")
    with pytest.raises(Unbuildable, match="not in timm.list_models"):
        vision.build_timm("no_such_model")
    monkeypatch.setitem(vision._config()["timm"], "models", {"resnet10t": {"skip": "a reason\n  on two lines"}})
    with pytest.raises(Unbuildable, match="^a reason on two lines$"):
        vision.build_timm("resnet10t")


def test_settings_precedence_task_then_groups_then_model():
    conf = vision.settings("torchvision", "vit_b_16", "classification")
    assert conf["kwargs"] == {"num_classes": 10, "image_size": 64} and conf["input"] == [2, 3, 64, 64]
    conf = vision.settings("torchvision", "maskrcnn_resnet50_fpn", "detection")
    assert conf["kwargs"]["num_classes"] == 3 and conf["kwargs"]["min_size"] == 64 and conf["targets"] == ["masks"]
    assert vision.settings("timm", "resnet18")["kwargs"] == {"num_classes": 10}


def test_full_selection_lists_every_torchvision_and_timm_model():
    import timm
    from torchvision import models

    notes = []
    ids = catalog.select("full", notes)
    assert {i for i in ids if i.startswith("tv/")} == {f"tv/{n}" for n in models.list_models()}
    assert sum(i.startswith("timm/") for i in ids) == len(timm.list_models())


def test_cpu_sweep_classifies_the_sample(tmp_path):
    from torchconform.sweep.driver import SweepOptions, run_sweep

    ids = [f"tv/{n}" for n in TV_SAMPLE.values()] + [f"timm/{n}" for n in TIMM_SAMPLE]
    unbuildable = ["tv/quantized_resnet18", "tv/regnet_y_128gf"]
    selection = tmp_path / "vision.txt"
    selection.write_text("\n".join(ids + unbuildable) + "\n")
    report = run_sweep(SweepOptions(build="vision", selection=str(selection), device="cpu",
                                    db=str(tmp_path / "r.db"), workers=1, variants=("eval", "train"),
                                    warm_calls=0,  # classification only: no timing runs
                                    timeout=300, progress_stream=open(os.devnull, "w")))
    got = {o.test_id: o for o in report.outcomes}
    assert len(got) == 2 * len(ids + unbuildable)
    for model_id in ids:
        for variant in ("eval", "train"):
            o = got[f"models::{model_id}::{variant}"]
            assert o.outcome == PASS, (o.test_id, o.outcome, o.message)
    for model_id in unbuildable:
        o = got[f"models::{model_id}::eval"]
        assert o.outcome == SKIP_ELIGIBILITY and o.message.startswith("unconstructible: "), o.message
