"""The Neuron team's model test, reproducible: CausalLM architectures at 2 layers and
sequence length 1024, forward and backward (``--selection neuron-causal-lm``).

torch-neuronx's own test (``tests/huggingface/``: a CausalLM head built from a config
with the layer count cut to 2, eager attention, one sequence of 1024 token ids with an
all-ones attention mask and random labels, then the loss's backward) is rebuilt here
from the configs this project already builds offline (hf.py: every config shrunk by
``data/shrink.yaml``, no hub access): model ids ``hfclm/<model type>``, one per entry
of transformers' CausalLM mapping.  The shrunk width (hidden 32) keeps a model to
seconds on a CPU; the length of the sequence, the layer count and the head are theirs.
The models suite's ``train`` variant is their forward-and-backward (``eval`` the
forward alone); each is compared with the same model on the CPU (check.py).
"""
from __future__ import annotations

from torchconform.suites.models import hf
from torchconform.suites.models.spec import Built, Unbuildable
from torchconform.suites.models.hf_inputs import _vocab

FAMILY = "hfclm"
SELECTION = "neuron-causal-lm"
SEQ_LEN = 1024      # torch-neuronx tests/huggingface: sequence length 1024, batch 1
BATCH = 1
LAYERS = 2          # ... with the layer count cut to 2
# the attributes that bound the positions a config's model accepts
POSITION_ATTRIBUTES = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")
LAYER_ATTRIBUTES = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")


def model_types() -> list[str]:
    """Every model type with a CausalLM head in the installed transformers."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def select(notes: list) -> list[str]:
    ok, why = hf.available()
    if not ok:
        notes.append(f"{SELECTION}: {why}")
        return []
    return [f"{FAMILY}/{t}" for t in model_types()]


def make_config(model_type: str):
    """The project's shrunk config of ``model_type``, at 2 layers, eager attention, and
    room for 1024 positions."""
    config = hf.make_config(model_type)
    for holder in (config, getattr(config, "text_config", None)):
        if holder is None:
            continue
        for name in LAYER_ATTRIBUTES:
            value = hf._get(holder, name)
            if isinstance(value, int) and not isinstance(value, bool) and value > LAYERS:
                hf._set(holder, name, LAYERS)
        for name in POSITION_ATTRIBUTES:
            value = hf._get(holder, name)
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value < SEQ_LEN:
                hf._set(holder, name, SEQ_LEN)
    hf._set(config, "_attn_implementation", "eager")
    return config


def inputs(config, seed: int = 0) -> dict:
    """One sequence of 1024 token ids, an all-ones mask and random labels (ids below the
    vocabulary, at most 1024 as in their test)."""
    import torch

    high = max(2, min(_vocab(config), SEQ_LEN))
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, high, (BATCH, SEQ_LEN), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "labels": torch.randint(0, high, (BATCH, SEQ_LEN), generator=generator)}


def build(name: str, seed: int = 0) -> Built:
    """``hfclm/<name>`` on CPU: the CausalLM head of the shrunk config, seeded weights."""
    ok, why = hf.available()
    if not ok:
        raise Unbuildable(why)
    import torch
    from transformers import AutoModelForCausalLM

    config = hf.buildable_config(name, make_config)
    limit = int(hf._rules()["max_parameters"])
    try:
        with torch.device("meta"):
            count = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {hf._one_line(exc)}") from exc
    if count > limit:
        raise Unbuildable(f"too large after shrinking: {count} parameters > {limit}")
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(config)
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {hf._one_line(exc)}") from exc
    forward = hf_forward_parameters(model)
    made = {k: v for k, v in inputs(config, seed).items() if not forward or k in forward}
    if "input_ids" not in made:
        raise Unbuildable(f"{name}: its CausalLM head takes no input_ids")
    return Built(model=model, inputs=made, parameters=count)


def hf_forward_parameters(model) -> set:
    """The names ``model.forward`` accepts (empty: it takes **kwargs, give everything)."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return set()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return set()
    return set(params)
