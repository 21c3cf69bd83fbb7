"""The Neuron team's model test as a models selection (issue 30, item 6): ``neuron-causal-lm``
builds every CausalLM head of the installed transformers from the project's offline
configs, at 2 layers and sequence length 1024, run forward and backward."""
import pytest

pytest.importorskip("transformers")

from torchconform.errors import UserError  # noqa: E402
from torchconform.suites.models import catalog, causal_lm, check  # noqa: E402


def test_the_selection_names_every_causal_lm_head():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    ids = catalog.select("neuron-causal-lm")
    assert ids == sorted(f"hfclm/{t}" for t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    assert "hfclm/llama" in ids and "hfclm/gpt2" in ids


def test_a_model_is_built_as_their_test_builds_it():
    built = catalog.build("hfclm/opt")
    config = built.model.config
    assert type(built.model).__name__ == "OPTForCausalLM"
    assert config.num_hidden_layers == 2 and config.max_position_embeddings >= 1024
    assert {k: tuple(v.shape) for k, v in built.inputs.items()} == {
        "input_ids": (1, 1024), "attention_mask": (1, 1024), "labels": (1, 1024)}
    assert int(built.inputs["input_ids"].max()) < min(config.vocab_size, 1024)
    # forward and backward: the models suite's train variant, with the head's loss among the outputs
    result = check.run_train(built.model, built.inputs)
    assert float(result["loss"]) > 0 and any(k.startswith("grad.") for k in result)


def test_hfclm_ids_are_accepted_in_model_lists():
    assert catalog.select("hfclm/llama,hfclm/gpt2") == ["hfclm/gpt2", "hfclm/llama"]
    with pytest.raises(UserError, match="neuron-causal-lm"):
        catalog.select("neuron-causal")
