"""Hugging Face ``transformers`` models built offline from tiny configurations.

Every base architecture in ``MODEL_MAPPING_NAMES`` is built with random
weights from its default config, shrunk by the rules in ``data/shrink.yaml``
plus the per-family entries of ``data/overrides.yaml``.  Nothing touches the
hub: ``HF_HUB_OFFLINE`` is forced before ``transformers`` is imported.
"""
from __future__ import annotations

import functools
import os

from torchconform.suites.models.data_files import load_yaml
from torchconform.suites.models.spec import Built, Unbuildable
from torchconform.suites.models import hf_inputs

FAMILY = "hf"

# Set before transformers (or huggingface_hub) is imported anywhere in the
# process: both read these once at import time.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def available() -> tuple[bool, str]:
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        return False, f"transformers is not installed ({exc}); pip install 'torchconform[zoo]'"
    return True, ""


def version() -> str:
    import transformers

    return transformers.__version__


@functools.lru_cache(maxsize=None)
def _rules() -> dict:
    return load_yaml("shrink.yaml")


@functools.lru_cache(maxsize=None)
def _overrides() -> dict:
    return load_yaml("overrides.yaml") or {}


def model_types() -> list[str]:
    """Every base model type this transformers version maps to an AutoModel class."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(MODEL_MAPPING_NAMES)


# --- defensive attribute access: some config properties raise on read/write ---

def _get(obj, name, default=None):
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


def _has(obj, name) -> bool:
    try:
        return hasattr(obj, name)
    except Exception:
        return False


def _set(obj, name, value) -> bool:
    try:
        setattr(obj, name, value)
        return True
    except Exception:
        return False


def _is_config(value) -> bool:
    from transformers import PretrainedConfig

    return isinstance(value, PretrainedConfig)


def _largest_divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def _shortest_prefix_with_every_type(types: list) -> list:
    wanted = set(map(str, types))
    seen = set()
    for i, t in enumerate(types):
        seen.add(str(t))
        if seen == wanted:
            return list(types[: i + 1])
    return list(types)


def _split_evenly(sections: list[int], total: int) -> list[int]:
    """``sections`` rescaled to add up to ``total``, keeping their proportions."""
    whole = sum(sections)
    new = [s * total // whole for s in sections]
    for i in sorted(range(len(new)), key=lambda i: -sections[i])[: total - sum(new)]:
        new[i] += 1
    return new


def _fit_rope_sections(config, keys) -> None:
    """Multimodal rotary sections (mrope_section [16, 24, 24]) split the rotary
    half-dimension of the full-size head; after shrinking the head they must
    add up to the new one (head_dim * partial_rotary_factor / 2)."""
    heads, hidden = _get(config, "num_attention_heads"), _get(config, "hidden_size")
    head_dim = _get(config, "head_dim")
    if not isinstance(head_dim, int) and isinstance(heads, int) and isinstance(hidden, int) and heads:
        head_dim = hidden // heads
    if not isinstance(head_dim, int) or head_dim <= 0:
        return
    for holder in ("rope_parameters", "rope_scaling"):
        params = _get(config, holder)
        if not isinstance(params, dict):
            continue
        factor = params.get("partial_rotary_factor", _get(config, "partial_rotary_factor", 1.0))
        factor = factor if isinstance(factor, (int, float)) and factor > 0 else 1.0
        half = int(head_dim * factor) // 2
        for key in keys:
            sections = params.get(key)
            if (isinstance(sections, list) and sections and all(isinstance(v, int) for v in sections)
                    and sum(sections) != half and half > 0):
                params[key] = _split_evenly(sections, half)


def shrink_config(config, rules: dict | None = None, _depth: int = 0):
    """Shrink ``config`` in place (and its nested sub-configs) by ``rules``."""
    rules = rules or _rules()
    # Nested sub-configs first: a parent may derive sizes from its children.
    if _depth < 4:
        for name in list(vars(config)):
            value = _get(config, name)
            if _is_config(value):
                shrink_config(value, rules, _depth + 1)

    for name, value in rules.get("set", {}).items():
        current = _get(config, name)
        if current is not None and not isinstance(current, (list, tuple, dict)) and _has(config, name):
            _set(config, name, value)

    for name, value in rules.get("fill_none", {}).items():
        if _has(config, name) and _get(config, name, 0) is None:
            _set(config, name, value)

    stages = _get(config, "num_stages")
    if isinstance(stages, int) and not isinstance(stages, bool) and stages > 0:
        for name in rules.get("stage_lists", []):
            current = _get(config, name)
            if isinstance(current, (list, tuple)) and len(current) > stages:
                _set(config, name, type(current)(current[:stages]))

    for name, limit in rules.get("cap_each", {}).items():
        current = _get(config, name)
        if isinstance(current, (list, tuple)) and all(isinstance(v, int) for v in current):
            _set(config, name, type(current)(min(v, limit) for v in current))

    heads = _get(config, "num_attention_heads")
    for name, limit in rules.get("cap", {}).items():
        current = _get(config, name)
        if not isinstance(current, int) or isinstance(current, bool) or current <= limit:
            continue
        if name == "num_key_value_heads" and isinstance(heads, int) and heads > 0:
            limit = _largest_divisor_at_most(heads, limit)
        if name == "vocab_size":
            # Special tokens must still index into the embedding table.
            specials = [_get(config, k) for k in rules.get("special_token_ids", [])]
            specials = [s for s in specials if isinstance(s, int) and not isinstance(s, bool)]
            limit = max([limit] + [s + 1 for s in specials])
            if limit >= current:
                continue
        _set(config, name, limit)

    _fit_rope_sections(config, rules.get("rope_sections", []))

    n_layers = None
    for name, how in rules.get("truncate_lists", {}).items():
        value = _get(config, name)
        if not isinstance(value, (list, tuple)) or not value:
            continue
        if how == "shortest_prefix_with_every_type":
            new = _shortest_prefix_with_every_type(list(value))
            n_layers = max(len(new), 1)
        elif how == "drop_out_of_range":
            continue  # handled below, once the layer count is known
        else:
            new = list(value)[: int(how)]
        _set(config, name, type(value)(new) if isinstance(value, tuple) else new)

    if n_layers is not None:
        # The layer count follows the truncated per-layer list.
        for name in ("num_hidden_layers", "num_layers"):
            if isinstance(_get(config, name), int):
                _set(config, name, n_layers)
    layers = _get(config, "num_hidden_layers")
    for name, how in rules.get("truncate_lists", {}).items():
        value = _get(config, name)
        if how == "drop_out_of_range" and isinstance(value, list) and isinstance(layers, int):
            _set(config, name, [i for i in value if isinstance(i, int) and i < layers])
    return config


def make_config(model_type: str):
    from transformers import AutoConfig

    override = _overrides().get(model_type, {}) or {}
    # ``init``: arguments of the config's constructor, for choices it makes once (a DETR
    # config builds a timm backbone unless given a backbone_config); shrunk like the rest.
    config = AutoConfig.for_model(model_type, **(override.get("init") or {}))
    shrink_config(config)
    for name, value in override.get("config", {}).items():
        # a dotted name reaches a sub-config or a dict attribute:
        # text_config.num_hidden_layers, rope_parameters.mrope_section
        *parents, leaf = name.split(".")
        target = config
        for part in parents:
            target = target.get(part) if isinstance(target, dict) else _get(target, part)
        current = target.get(leaf) if isinstance(target, dict) else _get(target, leaf)
        if isinstance(current, tuple) and isinstance(value, list):
            value = tuple(value)  # YAML has no tuples; some models concatenate them
        if isinstance(target, dict):
            target[leaf] = value
        elif target is not None:
            _set(target, leaf, value)
    return config


def dummy_inputs(model, config, model_type: str, seed: int = 0) -> dict:
    """Inputs named after ``model.main_input_name``, the generic extra-input rules
    and the family's override entries (hf_inputs.py says how each is made)."""
    override = _overrides().get(model_type, {}) or {}
    return hf_inputs.dummy_inputs(model, config, override, _rules(), seed)


def _one_line(exc: BaseException) -> str:
    """The exception's text on one line: stores keep a message's first line, and
    transformers' ImportError starts with a newline before naming the package."""
    return " ".join(str(exc).split())


def buildable_config(name: str, make=None):
    """``make(name)`` (default ``make_config``), or Unbuildable: the model is skipped by the
    overrides, or its config cannot be made."""
    skip = (_overrides().get(name, {}) or {}).get("skip")
    if skip:
        raise Unbuildable(f"{name}: {skip}")
    try:
        return (make or make_config)(name)
    except Exception as exc:
        raise Unbuildable(f"config: {type(exc).__name__}: {_one_line(exc)}") from exc


def build(name: str, seed: int = 0) -> Built:
    """Build ``hf/<name>`` on CPU with seeded random weights and dummy inputs."""
    return build_from_config(buildable_config(name), _base_model, name, seed)


def _base_model(config):
    """``AutoModel.from_config``, or where the auto mapping cannot find the class it lists
    for the type (a config class registered under two names, a model class the package
    does not export) that class from the model's own module: the same model."""
    import importlib

    from transformers import AutoModel
    from transformers.models.auto.configuration_auto import model_type_to_module_name
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    try:
        return AutoModel.from_config(config)
    except ValueError:
        name = MODEL_MAPPING_NAMES.get(config.model_type)
        if not isinstance(name, str):
            raise
        module = model_type_to_module_name(config.model_type)
        cls = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name, None)
        if cls is None:
            raise
        return cls._from_config(config)


def build_from_config(config, make, model_type: str, seed: int = 0) -> Built:
    """The model ``make(config)`` of a shrunk ``config`` (``hf/`` types and config files
    alike, hfconfig.py): sized on the meta device first and refused past
    ``max_parameters``, then built with seeded random weights, with dummy inputs."""
    import torch

    limit = int(_rules()["max_parameters"])
    try:
        with torch.device("meta"):
            count = sum(p.numel() for p in make(config).parameters())
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {_one_line(exc)}") from exc
    if count > limit:
        raise Unbuildable(f"too large after shrinking: {count} parameters > {limit}")
    torch.manual_seed(seed)
    try:
        model = make(config)
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {_one_line(exc)}") from exc
    try:
        inputs = dummy_inputs(model, config, model_type, seed)
    except Unbuildable:
        raise
    except Exception as exc:
        raise Unbuildable(f"inputs: {type(exc).__name__}: {_one_line(exc)}") from exc
    return Built(model=model, inputs=inputs, parameters=count)
