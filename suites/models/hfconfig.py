"""Models a team describes by a Hugging Face config file: ``hfcfg/<path>.json``.

The config's ``model_type`` picks transformers' config class; its other keys
(layer kinds, activations, attention variants, sub-configs) are kept, and the
sizes are shrunk by the same rules as the ``hf/`` family (``data/shrink.yaml``),
so that a 7B-parameter architecture runs on CPU in seconds with the operators
it really uses.  The class is the config's ``architectures[0]`` when
transformers has it (the model with its head, as the team runs it), else the
base ``AutoModel``.  Nothing is downloaded: the file is the whole description.
"""
from __future__ import annotations

import json

from torchconform.suites.models.spec import Built, Unbuildable
from torchconform.suites.models import hf


def load_config(path: str):
    """The transformers config of ``path``, shrunk; Unbuildable when it cannot be read."""
    from transformers import AutoConfig

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise Unbuildable(f"config file {path} not found")
    except (OSError, ValueError) as exc:
        raise Unbuildable(f"config file {path} is not readable JSON: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise Unbuildable(f"config file {path} names no model_type; add the transformers model_type it is for")
    settings = {k: v for k, v in data.items() if k != "model_type"}
    try:
        config = AutoConfig.for_model(data["model_type"], **settings)
    except Exception as exc:
        raise Unbuildable(f"config: {type(exc).__name__}: {exc}") from exc
    hf.shrink_config(config)
    _keep_grouped_query(config, data)
    return config, data.get("architectures") or []


def _keep_grouped_query(config, original: dict) -> None:
    """Shrinking caps both head counts alike, which can turn grouped-query attention
    (fewer key/value heads than query heads) into plain multi-head attention; keep
    the file's grouping ratio where the shrunk head count allows it."""
    heads, kv = original.get("num_attention_heads"), original.get("num_key_value_heads")
    new_heads = getattr(config, "num_attention_heads", None)
    if not all(isinstance(v, int) and v > 0 for v in (heads, kv, new_heads)) or kv >= heads:
        return
    groups = max(1, heads // kv)
    new_kv = max(1, new_heads // groups)
    while new_heads % new_kv:
        new_kv -= 1
    if new_kv < new_heads:
        config.num_key_value_heads = new_kv


def model_class(architectures):
    import transformers
    from transformers import AutoModel

    for name in architectures[:1]:
        cls = getattr(transformers, str(name), None)
        if cls is not None and hasattr(cls, "_from_config"):
            return cls
    return AutoModel


def build(path: str, seed: int = 0) -> Built:
    ok, why = hf.available()
    if not ok:
        raise Unbuildable(why)
    config, architectures = load_config(path)
    cls = model_class(architectures)
    # AutoModel picks the class from the config; a concrete class builds itself.
    make = cls.from_config if hasattr(cls, "from_config") else cls._from_config
    return hf.build_from_config(config, make, config.model_type, seed)
