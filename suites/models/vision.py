"""torchvision and timm models (extra ``vision``), imported only when asked for.

Neither package is part of the default set-up (on some machines they need a
different torch build), so nothing here imports them at module level: a
selection naming ``tv/...`` or ``timm/...`` models without the package gets
each model recorded as ``skip_eligibility`` with the reason, and enumerating
the ``full`` selection leaves the family out with a note.
"""
from __future__ import annotations

import inspect

from torchconform.suites.models.spec import Built, Unbuildable

MISSING = "{pkg} is not installed; pip install 'torchconform[vision]' (needs a matching torch build)"

# Inputs that differ from the image default (batch, 3, 224, 224).
_TV_INPUT = {
    "inception_v3": (2, 3, 299, 299),
    "googlenet": (2, 3, 224, 224),
}
_TV_VIDEO = (1, 3, 8, 112, 112)
MAX_PARAMETERS = 100_000_000


def available(pkg: str) -> tuple[bool, str]:
    try:
        __import__(pkg)
    except ImportError:
        return False, MISSING.format(pkg=pkg)
    return True, ""


def torchvision_names() -> list[str]:
    ok, _ = available("torchvision")
    if not ok:
        return []
    from torchvision import models

    return sorted(models.list_models())


def timm_names() -> list[str]:
    ok, _ = available("timm")
    if not ok:
        return []
    import timm

    return sorted(timm.list_models())


def build_torchvision(name: str, seed: int = 0) -> Built:
    import torch

    ok, why = available("torchvision")
    if not ok:
        raise Unbuildable(why)
    from torchvision import models

    builder = models.get_model_builder(name)
    kwargs = {"weights": None}
    # Segmentation/detection builders download a backbone unless told not to.
    if "weights_backbone" in inspect.signature(builder).parameters:
        kwargs["weights_backbone"] = None
    torch.manual_seed(seed)
    try:
        model = builder(**kwargs)
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {exc}") from exc
    module = type(model).__module__
    shape = _TV_VIDEO if ".video." in module else _TV_INPUT.get(name, (2, 3, 224, 224))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    if ".detection." in module or ".optical_flow." in module:
        raise Unbuildable(f"{name}: detection/optical-flow models need targets or image pairs; not covered yet")
    return Built(model=model, inputs={"x": x}, parameters=sum(p.numel() for p in model.parameters()))


def build_timm(name: str, seed: int = 0) -> Built:
    import torch

    ok, why = available("timm")
    if not ok:
        raise Unbuildable(why)
    import timm

    torch.manual_seed(seed)
    try:
        with torch.device("meta"):
            count = sum(p.numel() for p in timm.create_model(name, pretrained=False).parameters())
        if count > MAX_PARAMETERS:
            raise Unbuildable(f"too large: {count} parameters > {MAX_PARAMETERS}")
        model = timm.create_model(name, pretrained=False)
    except Unbuildable:
        raise
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {exc}") from exc
    size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    g = torch.Generator().manual_seed(seed)
    return Built(model=model, inputs={"x": torch.randn(2, *size, generator=g)}, parameters=count)
