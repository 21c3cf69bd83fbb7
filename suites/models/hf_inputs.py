"""Dummy inputs for the Hugging Face tiny-config builder (split out of hf.py).

Which inputs a model gets:

1. its ``main_input_name`` (``input_ids``, ``pixel_values``, ...);
2. the generic ``extra_inputs`` rules of ``data/shrink.yaml``: an input is
   added when the model's ``forward`` accepts it and the config matches the
   rule (``decoder_input_ids`` for every encoder-decoder, ``pixel_values``
   for dual encoders such as CLIP that have a vision tower but no image
   placeholder token);
3. the per-family ``inputs`` of ``data/overrides.yaml``.

Each input is made by a named rule below (``input_ids``, ``pixel_values``,
...) unless the data gives a spec for it:

    inputs:
      - decoder_input_ids                          # the named rule
      - input_features: {shape: [batch, 64, num_mel_bins]}
      - image_grid_thw: {value: [[1, 4, 4]]}       # a literal tensor
      - attention_mask: {shape: [batch, seq_len], kind: ones}

A shape entry is an integer, ``batch``/``seq_len``/``image_size``, or a
product (``a*b*2``) of integers and config attributes (dotted paths reach
sub-configs: ``vision_config.patch_size``).  Kinds: ``randn`` (default),
``ones``, ``zeros``, ``ints`` (uniform in [0, ``high``), ``high`` an integer
or attribute), ``boxes`` (sorted [x0, y0, x1, y1] in [0, 1000)), ``mask``
(boolean ones), ``no_padding`` (boolean zeros: a mask whose True marks
padding).  A spec given for the main input replaces its named rule.
"""
from __future__ import annotations

import inspect

from torchconform.suites.models.spec import Unbuildable


def get(obj, name, default=None):
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


def resolve(config, path: str):
    """``a.b.c`` on ``config``; None when any step is missing."""
    value = config
    for part in path.split("."):
        value = get(value, part)
        if value is None:
            return None
    return value


def _vocab(config) -> int:
    vocab = get(config, "vocab_size")
    if not isinstance(vocab, int):
        sub = get(config, "text_config")
        vocab = get(sub, "vocab_size", 100) if sub is not None else 100
    return vocab if isinstance(vocab, int) else 100


def image_size(config, default):
    size = get(config, "image_size")
    if isinstance(size, (list, tuple)) and size:
        size = size[0]
    sub = get(config, "vision_config")
    if not isinstance(size, int) and sub is not None:
        size = get(sub, "image_size")
        if isinstance(size, (list, tuple)) and size:
            size = size[0]
    return size if isinstance(size, int) and size > 0 else default


def _dim(entry, config, shape: dict) -> int:
    if isinstance(entry, int) and not isinstance(entry, bool):
        return entry
    total = 1
    for term in str(entry).split("*"):
        term = term.strip()
        if term.isdigit():
            total *= int(term)
            continue
        if term in shape:
            total *= int(shape[term])
            continue
        if term == "image_size":
            total *= image_size(config, shape["image_size_default"])
            continue
        value = resolve(config, term)
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if not isinstance(value, int) or isinstance(value, bool):
            raise Unbuildable(f"input shape term {term!r} is not an integer config attribute")
        total *= value
    return total


def from_spec(name: str, spec: dict, config, shape: dict, generator):
    """An input made from a data spec (see the module docstring)."""
    import torch

    if "value" in spec:
        value = spec["value"]
        return torch.tensor(value, dtype=torch.float32 if spec.get("kind") == "randn" else None)
    dims = [_dim(d, config, shape) for d in spec.get("shape", [])]
    kind = spec.get("kind", "randn")
    if kind == "randn":
        return torch.randn(*dims, generator=generator)
    if kind == "ones":
        return torch.ones(*dims, dtype=torch.long)
    if kind == "zeros":
        return torch.zeros(*dims, dtype=torch.long)
    if kind == "mask":
        return torch.ones(*dims, dtype=torch.bool)
    if kind == "no_padding":   # a padding mask where True marks padding: nothing padded
        return torch.zeros(*dims, dtype=torch.bool)
    if kind == "ints":
        high = _dim(spec.get("high", 100), config, shape)
        return torch.randint(0, max(high, 1), dims, generator=generator)
    if kind == "boxes":
        corners = torch.randint(0, 1000, dims[:-1] + [2, 2], generator=generator)
        low, high = corners.min(dim=-2).values, corners.max(dim=-2).values
        return torch.cat([low, high], dim=-1)
    raise Unbuildable(f"input {name!r}: unknown kind {kind!r}")


GRID_INPUTS = ("grid_thw", "image_grid_thw")


def _first_int(config, names, default):
    for name in names:
        value = get(config, name)
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def _patch_grid(config, shape: dict) -> list[int]:
    """[t, h, w] patches of one image for vision towers fed flattened patches
    (Qwen2-VL style): h and w a multiple of the patch-merging factor."""
    merge = _first_int(config, ("spatial_merge_size", "merge_size"), 1)
    side = merge * int(shape.get("grid_side", 2))
    return [1, side, side]


def _patches(config, shape: dict, generator):
    """(patches, channels * temporal * patch * patch): one row per patch of ``_patch_grid``."""
    import torch

    t, h, w = _patch_grid(config, shape)
    channels = _first_int(config, ("in_channels", "num_channels", "in_chans"), 3)
    temporal = _first_int(config, ("temporal_patch_size",), 1)
    patch = _first_int(config, ("patch_size",), 14)
    return torch.randn(t * h * w, channels * temporal * patch * patch, generator=generator)


def _named(name: str, config, shape: dict, generator, wanted=()):
    """The named input rules: one per input name the zoo knows how to fill."""
    import torch

    batch, seq = shape["batch"], shape["seq_len"]
    if name in GRID_INPUTS:
        return torch.tensor([_patch_grid(config, shape)])
    if name in ("hidden_states", "pixel_values") and any(g in wanted for g in GRID_INPUTS):
        return _patches(config, shape, generator)
    if name in ("input_ids", "decoder_input_ids", "qformer_input_ids"):
        # Stay clear of special ids at the top of small vocabularies.
        high = max(2, min(_vocab(config), 100))
        return torch.randint(0, high, (batch, seq), generator=generator)
    if name in ("attention_mask", "decoder_attention_mask", "qformer_attention_mask"):
        return torch.ones(batch, seq, dtype=torch.long)
    if name == "token_type_ids":
        return torch.zeros(batch, seq, dtype=torch.long)
    if name in ("pixel_values", "pixel_values_videos"):
        vision = get(config, "vision_config") or config
        channels = get(vision, "num_channels", get(config, "num_channels", 3))
        channels = channels if isinstance(channels, int) else 3
        size = image_size(config, shape["image_size_default"])
        return torch.randn(batch, channels, size, size, generator=generator)
    if name == "input_values":
        return torch.randn(batch, shape["audio_samples"], generator=generator)
    if name == "input_features":
        bins = get(config, "num_mel_bins", 80)
        frames = 2 * get(config, "max_source_positions", 1500)
        return torch.randn(batch, bins, frames, generator=generator)
    if name == "inputs_embeds":
        hidden = get(config, "hidden_size", 32)
        return torch.randn(batch, seq, hidden, generator=generator)
    return None


def _forward_parameters(model) -> set:
    try:
        return set(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return set()


def _required_parameters(model) -> list[str]:
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _matches(rule: dict, config, accepted: set) -> bool:
    """A generic extra-input rule: every condition it states must hold."""
    def listed(key):
        value = rule.get(key, [])
        return [value] if isinstance(value, str) else list(value)

    if not all(name in accepted for name in listed("forward_accepts")):
        return False
    if not all(get(config, name) is True for name in listed("config_true")):
        return False
    if not all(get(config, name) is not None for name in listed("config_has")):
        return False
    # a placeholder token id (set on the config or its text part) means the
    # model splices image features into the text: text-only inputs then
    if any(get(config, name) is not None or get(get(config, "text_config"), name) is not None
           for name in listed("config_lacks")):
        return False
    return True


def _entries(items) -> list[tuple[str, dict | None]]:
    out = []
    for item in items or []:
        if isinstance(item, dict):
            out += [(str(k), v if isinstance(v, dict) else {"value": v}) for k, v in item.items()]
        else:
            out.append((str(item), None))
    return out


def dummy_inputs(model, config, override: dict, rules: dict, seed: int = 0) -> dict:
    """Inputs for ``model``: main input, generic extras, then the family's override entries."""
    import torch

    shape = rules["inputs"]
    g = torch.Generator().manual_seed(seed)
    accepted = _forward_parameters(model)
    main = getattr(model, "main_input_name", "input_ids") or "input_ids"
    mains = list(main) if isinstance(main, (list, tuple)) else [main]  # OneFormer names two
    required = _required_parameters(model)
    # The forward's required arguments are inputs too; a tower whose
    # main_input_name is inherited and wrong (a vision model saying input_ids)
    # gets only those.
    known = not accepted or all(m in accepted for m in mains)
    wanted: dict[str, dict | None] = {m: None for m in mains} if known or not required else {}
    wanted.update({name: None for name in required})
    for rule in rules.get("extra_inputs", []):
        if rule["input"] not in wanted and _matches(rule, config, accepted):
            wanted[rule["input"]] = None
    for name, spec in _entries(override.get("inputs")):
        wanted[name] = spec
    inputs = {}
    for name, spec in wanted.items():
        value = (from_spec(name, spec, config, shape, g) if spec is not None
                 else _named(name, config, shape, g, wanted))
        if value is None:
            raise Unbuildable(f"no dummy input rule for {name!r}")
        inputs[name] = value
    return inputs
