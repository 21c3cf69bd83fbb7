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

    config = AutoConfig.for_model(model_type)
    shrink_config(config)
    for name, value in (_overrides().get(model_type, {}) or {}).get("config", {}).items():
        _set(config, name, value)
    return config


def _count_parameters_on_meta(config) -> int:
    import torch
    from transformers import AutoModel

    with torch.device("meta"):
        model = AutoModel.from_config(config)
    return sum(p.numel() for p in model.parameters())


def _seq_inputs(name: str, config, shape: dict, generator):
    import torch

    batch, seq = shape["batch"], shape["seq_len"]
    if name in ("input_ids", "decoder_input_ids"):
        vocab = _get(config, "vocab_size")
        if not isinstance(vocab, int):
            sub = _get(config, "text_config")
            vocab = _get(sub, "vocab_size", 100) if sub is not None else 100
        # Stay clear of special ids at the top of small vocabularies.
        high = max(2, min(vocab, 100))
        return torch.randint(0, high, (batch, seq), generator=generator)
    return None


def _image_size(config, default):
    size = _get(config, "image_size")
    if isinstance(size, (list, tuple)) and size:
        size = size[0]
    sub = _get(config, "vision_config")
    if not isinstance(size, int) and sub is not None:
        size = _get(sub, "image_size")
    return size if isinstance(size, int) and size > 0 else default


def dummy_inputs(model, config, model_type: str, seed: int = 0) -> dict:
    """Inputs named after ``model.main_input_name`` (plus per-family extras)."""
    import torch

    shape = _rules()["inputs"]
    g = torch.Generator().manual_seed(seed)
    names = [getattr(model, "main_input_name", "input_ids") or "input_ids"]
    names += (_overrides().get(model_type, {}) or {}).get("inputs", [])
    inputs = {}
    for name in names:
        value = _seq_inputs(name, config, shape, g)
        if value is None and name in ("pixel_values", "pixel_values_videos"):
            channels = _get(config, "num_channels", 3)
            channels = channels if isinstance(channels, int) else 3
            size = _image_size(config, shape["image_size_default"])
            value = torch.randn(shape["batch"], channels, size, size, generator=g)
        elif value is None and name == "input_values":
            value = torch.randn(shape["batch"], shape["audio_samples"], generator=g)
        elif value is None and name == "input_features":
            bins = _get(config, "num_mel_bins", 80)
            frames = 2 * _get(config, "max_source_positions", 1500)
            value = torch.randn(shape["batch"], bins, frames, generator=g)
        elif value is None and name == "inputs_embeds":
            hidden = _get(config, "hidden_size", 32)
            value = torch.randn(shape["batch"], shape["seq_len"], hidden, generator=g)
        if value is None:
            raise Unbuildable(f"no dummy input rule for main_input_name {name!r}")
        inputs[name] = value
    return inputs


def build(name: str, seed: int = 0) -> Built:
    """Build ``hf/<name>`` on CPU with seeded random weights and dummy inputs."""
    import torch
    from transformers import AutoModel

    skip = (_overrides().get(name, {}) or {}).get("skip")
    if skip:
        raise Unbuildable(f"{name}: {skip}")
    try:
        config = make_config(name)
    except Exception as exc:
        raise Unbuildable(f"config: {type(exc).__name__}: {exc}") from exc
    limit = int(_rules()["max_parameters"])
    try:
        count = _count_parameters_on_meta(config)
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {exc}") from exc
    if count > limit:
        raise Unbuildable(f"too large after shrinking: {count} parameters > {limit}")
    torch.manual_seed(seed)
    try:
        model = AutoModel.from_config(config)
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {exc}") from exc
    try:
        inputs = dummy_inputs(model, config, name, seed)
    except Unbuildable:
        raise
    except Exception as exc:
        raise Unbuildable(f"inputs: {type(exc).__name__}: {exc}") from exc
    return Built(model=model, inputs=inputs, parameters=count)
