"""torchvision and timm models (extra ``vision``), imported only when asked for.

Neither package is part of the default set-up (on some machines they need a
different torch build: ``make vision-test`` makes its own venv), so nothing here
imports them at module level: a selection naming ``tv/...`` or ``timm/...`` models
without the package gets each model recorded as ``skip_eligibility`` with the
reason, and enumerating the ``full`` selection leaves the family out with a note.

How each model is shrunk and fed lives in ``data/vision.yaml`` (documented there).
Inputs follow the task, because torchvision's tasks take different things:

- classification, segmentation, video: one tensor ``x`` (video: a 5-D clip)
- detection: ``images``, a list of 3-D images of different sizes, and ``targets``
  (boxes, labels; masks or keypoints where the model's heads need them).  In
  train mode the model returns its losses, in eval mode its detections; check.py
  flattens either and compares like with like (CPU train with device train).
- optical flow: ``image1`` and ``image2`` and a small ``num_flow_updates``; the
  model returns the flow after every update.
"""
from __future__ import annotations

import copy
import fnmatch
import functools
import inspect

from torchconform.suites.models.data_files import load_yaml
from torchconform.suites.models.spec import Built, Unbuildable

MISSING = "{pkg} is not installed; pip install 'torchconform[vision]' (needs a matching torch build)"
# torchvision.models sub-modules, by the task name used in vision.yaml and reports.
TV_TASKS = ("classification", "detection", "segmentation", "video", "optical_flow", "quantization")


def available(pkg: str) -> tuple[bool, str]:
    try:
        __import__(pkg)
    except ImportError:
        return False, MISSING.format(pkg=pkg)
    except Exception as exc:  # noqa: BLE001 - e.g. torchvision built for another torch
        return False, f"{pkg} does not import here ({type(exc).__name__}: {exc}); it needs a matching torch build"
    return True, ""


@functools.lru_cache(maxsize=None)
def _config() -> dict:
    return load_yaml("vision.yaml")


def _merge(into: dict, level: dict | None) -> None:
    """Fold one level of vision.yaml into ``into``: kwargs merge, everything else replaces."""
    for key, value in (level or {}).items():
        if key == "kwargs":
            into.setdefault("kwargs", {}).update(value or {})
        elif key != "match":
            into[key] = copy.deepcopy(value)


def settings(section: str, name: str, task: str | None = None) -> dict:
    """The merged vision.yaml settings of model ``name`` (section torchvision or timm)."""
    table = _config()[section]
    merged: dict = {"kwargs": {}}
    if task is not None:
        _merge(merged, table["tasks"].get(task))
    else:
        _merge(merged, {k: v for k, v in table.items() if k not in ("groups", "models", "max_parameters")})
    for group in table.get("groups") or []:
        if fnmatch.fnmatchcase(name, group["match"]):
            _merge(merged, group)
    _merge(merged, (table.get("models") or {}).get(name))
    return merged


# -- torchvision --------------------------------------------------------------------------

def torchvision_names() -> list[str]:
    ok, _ = available("torchvision")
    if not ok:
        return []
    from torchvision import models

    return sorted(models.list_models())


@functools.lru_cache(maxsize=None)
def _tv_tasks() -> dict:
    """name -> task, from torchvision's own registry per sub-module."""
    from torchvision import models

    found = {}
    for task in TV_TASKS:
        module = models if task == "classification" else getattr(models, task, None)
        if module is not None:
            for name in models.list_models(module=module):
                found.setdefault(name, task)
    return found


def torchvision_task(name: str) -> str:
    """classification, detection, segmentation, video, optical_flow or quantization
    ("" for a name torchvision does not list)."""
    ok, _ = available("torchvision")
    return _tv_tasks().get(name, "") if ok else ""


def _count_on_meta(make) -> int | None:
    """Parameters of ``make()`` built on the meta device (no memory, no init time);
    None when the constructor does something meta tensors cannot (then the real
    build is counted instead)."""
    import torch

    try:
        with torch.device("meta"):
            return sum(p.numel() for p in make().parameters())
    except Exception:  # noqa: BLE001 - any constructor quirk; the real build decides
        return None


def _check_size(count: int | None, cap: int) -> None:
    if count is not None and count > cap:
        raise Unbuildable(f"too large: {count} parameters > {cap} (max_parameters in vision.yaml)")


def _detection_targets(images, conf: dict, kwargs: dict, g) -> list[dict]:
    """Ground truth for a training step: ``boxes`` boxes per image inside the image,
    labels among the model's classes, and masks/keypoints where the heads need them."""
    import torch

    n = int(conf.get("boxes", 2))
    classes = int(kwargs.get("num_classes", 91))
    extras = set(conf.get("targets") or ())
    targets = []
    for img in images:
        h, w = img.shape[-2:]
        x1 = torch.rand(n, generator=g) * (w / 2)
        y1 = torch.rand(n, generator=g) * (h / 2)
        bw = (0.25 + 0.25 * torch.rand(n, generator=g)) * w
        bh = (0.25 + 0.25 * torch.rand(n, generator=g)) * h
        boxes = torch.stack([x1, y1, x1 + bw, y1 + bh], dim=1)
        target = {"boxes": boxes, "labels": torch.randint(1, classes, (n,), generator=g)}
        if "masks" in extras:
            masks = torch.zeros(n, h, w, dtype=torch.uint8)
            for i, (a, b, c, d) in enumerate(boxes.round().long().tolist()):
                masks[i, b:d, a:c] = 1
            target["masks"] = masks
        if "keypoints" in extras:
            k = int(kwargs.get("num_keypoints", 17))
            frac = torch.rand(n, k, 2, generator=g)
            xs = boxes[:, None, 0] + frac[..., 0] * (boxes[:, None, 2] - boxes[:, None, 0])
            ys = boxes[:, None, 1] + frac[..., 1] * (boxes[:, None, 3] - boxes[:, None, 1])
            target["keypoints"] = torch.stack([xs, ys, torch.ones(n, k)], dim=2)
        targets.append(target)
    return targets


def _input_name(model) -> str:
    """The name of the forward's first argument: check.py calls ``model(**inputs)``, and
    the image argument is not always ``x`` (LRASPP's is ``input``)."""
    try:
        params = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return "x"
    return params[0] if params else "x"


def _no_stochastic_depth(model) -> None:
    """Switch off torchvision's StochasticDepth (ConvNeXt, EfficientNet, Swin, MaxViT, MViT).
    check.py zeroes modules named like dropout; this one is not, and in train mode it
    drops residual branches at random, with the device's generator on the device: CPU
    and device would then differ for no fault of the device."""
    from torchvision.ops import StochasticDepth

    for module in model.modules():
        if isinstance(module, StochasticDepth):
            module.p = 0.0


def _tv_inputs(task: str, conf: dict, seed: int, model) -> dict:
    import torch

    g = torch.Generator().manual_seed(seed)
    if task == "detection":
        images = [torch.rand(*shape, generator=g) for shape in conf["images"]]
        return {"images": images, "targets": _detection_targets(images, conf, conf["kwargs"], g)}
    shape = conf["input"]
    if task == "optical_flow":
        return {"image1": torch.randn(*shape, generator=g), "image2": torch.randn(*shape, generator=g),
                "num_flow_updates": int(conf.get("num_flow_updates", 2))}
    return {_input_name(model): torch.randn(*shape, generator=g)}


def build_torchvision(name: str, seed: int = 0) -> Built:
    import torch

    ok, why = available("torchvision")
    if not ok:
        raise Unbuildable(why)
    from torchvision import models

    task = torchvision_task(name)
    if not task:
        raise Unbuildable(f"torchvision {name!r} is not in torchvision.models.list_models()")
    conf = settings("torchvision", name, task)
    if conf.get("skip"):
        raise Unbuildable(" ".join(str(conf["skip"]).split()))
    builder = models.get_model_builder(name)
    kwargs = {"weights": None, **conf["kwargs"]}
    # Segmentation/detection builders would download a pretrained backbone unless told not to.
    if "weights_backbone" in inspect.signature(builder).parameters:
        kwargs["weights_backbone"] = None
    _check_size(_count_on_meta(lambda: builder(**kwargs)), _config()["torchvision"]["max_parameters"])
    torch.manual_seed(seed)
    try:
        model = builder(**kwargs)
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {exc}") from exc
    count = sum(p.numel() for p in model.parameters())
    _check_size(count, _config()["torchvision"]["max_parameters"])
    _no_stochastic_depth(model)
    inputs = _tv_inputs(task, conf, seed, model)
    return Built(model=model, inputs=inputs, parameters=count,
                 extra={"task": task, "kwargs": {k: v for k, v in kwargs.items() if v is not None}})


# -- timm ---------------------------------------------------------------------------------

def timm_names() -> list[str]:
    ok, _ = available("timm")
    if not ok:
        return []
    import timm

    return sorted(timm.list_models())


def _timm_create(name: str, kwargs: dict, image_size: int | None):
    """timm.create_model with ``img_size`` when given and the model takes it; returns
    (model, whether img_size was applied).  Built without it when the class has no such
    argument (most CNNs: a TypeError) or cannot be made at that size (a Swin whose
    windows do not tile the small grid fails in its constructor): the small size only
    saves time, and an error of the model itself is then raised by the plain build."""
    import timm

    if image_size is not None:
        try:
            return timm.create_model(name, pretrained=False, img_size=image_size, **kwargs), True
        except Exception:  # noqa: BLE001 - see above; the plain build below reports real errors
            pass
    return timm.create_model(name, pretrained=False, **kwargs), False


def _runs_at(model, x) -> bool:
    """One eval forward at batch 1: does the model accept this input size?"""
    import torch

    model.eval()
    try:
        with torch.no_grad():
            model(x[:1])
    except Exception:  # noqa: BLE001 - any shape complaint means "not at this size"
        return False
    return True


def build_timm(name: str, seed: int = 0) -> Built:
    import torch

    ok, why = available("timm")
    if not ok:
        raise Unbuildable(why)
    import timm

    if not timm.is_model(name):
        raise Unbuildable(f"timm {name!r} is not in timm.list_models()")
    conf = settings("timm", name)
    if conf.get("skip"):
        raise Unbuildable(" ".join(str(conf["skip"]).split()))
    kwargs = dict(conf["kwargs"])
    cap = _config()["timm"]["max_parameters"]
    small = conf.get("image_size")
    batch = int(conf.get("batch", 2))
    g = torch.Generator().manual_seed(seed)
    try:
        _check_size(_count_on_meta(lambda: _timm_create(name, kwargs, small)[0]), cap)
        torch.manual_seed(seed)
        model, sized = _timm_create(name, kwargs, small)
        default = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
        shape = tuple(conf["input"]) if conf.get("input") else None
        if shape is None and small:
            shape = (batch, default[0], small, small)
            x = torch.randn(*shape, generator=g)
            if not _runs_at(model, x):
                # Not at the small size: the model as timm makes it, at its own input size.
                shape = (batch, *default)
                if sized:
                    torch.manual_seed(seed)
                    model, sized = _timm_create(name, kwargs, None)
        shape = shape or (batch, *default)
    except Unbuildable:
        raise
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {exc}") from exc
    count = sum(p.numel() for p in model.parameters())
    _check_size(count, cap)
    g = torch.Generator().manual_seed(seed)
    return Built(model=model, inputs={_input_name(model): torch.randn(*shape, generator=g)}, parameters=count,
                 extra={"task": "timm", "input": list(shape), "img_size": small if sized else None})
