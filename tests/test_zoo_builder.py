"""The Hugging Face tiny-config builder, selections, comparisons: in-process, seconds."""
import os
import socket

import pytest
import torch

pytest.importorskip("transformers", reason="extra zoo: pip install 'torchconform[zoo]'")

from torchconform.collectors.outcome import PASS, SKIP_ELIGIBILITY  # noqa: E402
from torchconform.errors import UserError  # noqa: E402
from torchconform.skiplists.profile import load_profile  # noqa: E402
from torchconform.suites.models import catalog, compare, hf  # noqa: E402
from torchconform.suites.models.check import run_model  # noqa: E402
from torchconform.suites.models.spec import Unbuildable  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "zoo", "faulty.py")


def test_hub_is_offline_and_no_socket_is_opened(monkeypatch):
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    opened = []

    def refuse(*args, **kwargs):
        opened.append(args)
        raise OSError("network access attempted by the zoo builder")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for name in ("bert", "t5", "vit"):
        built = hf.build(name)
        with torch.no_grad():
            built.model.eval()(**built.inputs)
    assert opened == []


def test_shrink_rules_apply_to_config_and_nested_sub_configs():
    config = hf.make_config("llama")
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (32, 2, 4)
    assert config.vocab_size <= 1024
    # a composite model: the text and vision towers are shrunk too
    clip = hf.make_config("clip")
    assert clip.text_config.hidden_size == 32 and clip.vision_config.hidden_size == 32


def test_vocabulary_cap_stays_above_the_highest_special_token():
    config = hf.make_config("gpt2")  # eos/bos 50256
    assert config.vocab_size == 50257
    config = hf.make_config("bert")
    assert config.vocab_size == 1024


def test_layer_types_cut_to_shortest_prefix_holding_every_type():
    from transformers import PretrainedConfig

    config = PretrainedConfig()
    config.num_hidden_layers = 12
    config.layer_types = ["sliding", "sliding", "full", "sliding", "full", "full"] * 2
    config.num_attention_heads = 4
    config.num_key_value_heads = 3
    hf.shrink_config(config)
    assert config.layer_types == ["sliding", "sliding", "full"]
    assert config.num_hidden_layers == 3
    assert config.num_key_value_heads == 3  # under the cap: left alone
    config.num_key_value_heads = 8
    hf.shrink_config(config)
    assert config.num_key_value_heads == 4 and config.num_attention_heads % config.num_key_value_heads == 0


def test_parameter_count_is_checked_on_meta_before_building(monkeypatch):
    monkeypatch.setitem(hf._rules(), "max_parameters", 1000)
    with pytest.raises(Unbuildable, match="too large after shrinking"):
        hf.build("bert")


def test_dummy_inputs_follow_main_input_name():
    assert set(hf.build("vit").inputs) == {"pixel_values"}
    assert set(hf.build("wav2vec2").inputs) == {"input_values"}
    assert set(hf.build("t5").inputs) == {"input_ids", "decoder_input_ids"}


def test_unconstructible_and_cpu_failures_are_skip_eligibility_with_reason(tmp_path):
    profile = load_profile("cpu")
    outs = run_model("hf/no_such_model_type", "cpu", profile, variants=("eval", "train"))
    assert [o.outcome for o in outs] == [SKIP_ELIGIBILITY] * 2
    assert all(o.message.startswith("unconstructible: config:") for o in outs)
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                   "        raise ValueError('broken on CPU too')\n"
                   "def model():\n    return M(), {'x': torch.ones(2)}\n")
    outs = run_model(f"py/{bad}::model", "cpu", profile, variants=("eval",))
    assert outs[0].outcome == SKIP_ELIGIBILITY and "CPU reference failed: ValueError" in outs[0].message


def test_vision_families_are_skipped_with_a_clear_reason_when_missing():
    for pkg, model_id in (("torchvision", "tv/resnet18"), ("timm", "timm/resnet18")):
        try:
            __import__(pkg)
            continue
        except ImportError:
            pass  # not installed: it must be refused with the clear reason below
        with pytest.raises(Unbuildable, match=r"torchconform\[vision\]"):
            catalog.build(model_id)
        notes = []
        ids = catalog.select("full", notes)
        assert not any(i.startswith(model_id.split("/")[0] + "/") for i in ids)
        assert any(pkg in n for n in notes)


def test_selections():
    quick = catalog.select("quick")
    assert 15 <= len(quick) <= 30
    full = catalog.select("full")
    assert set(quick) <= set(full) and len(full) == len(hf.model_types())
    assert catalog.select("hf/gpt2,hf/bert") == ["hf/bert", "hf/gpt2"]
    with pytest.raises(UserError, match="unknown model selection"):
        catalog.select("nope")
    with pytest.raises(UserError, match="is not FAMILY/NAME"):
        catalog.select("hf/bert,bert")


def test_expected_covered_set_is_pinned_for_this_transformers_version():
    from torchconform.suites.models import coverage

    expected = coverage.expected()
    assert expected["transformers"] == hf.version()
    assert len(expected["covered"]) >= 300
    # the quick selection is drawn from models known to work on CPU
    assert set(catalog.select("quick")) <= {f"hf/{m}" for m in expected["covered"]}


def test_tolerances_per_dtype_and_kind():
    assert compare.tolerance(torch.float32) == (1e-4, 1e-5)
    assert compare.tolerance(torch.float32, "train")[0] == pytest.approx(1e-3)
    assert compare.tolerance(torch.bfloat16)[0] > compare.tolerance(torch.float16)[0]
    a = {"out": torch.ones(3)}
    compare.assert_same({"out": torch.ones(3) + 1e-7}, a, "eval")
    with pytest.raises(AssertionError, match="out differs from CPU"):
        compare.assert_same({"out": torch.ones(3) * 1.01}, a, "eval")
    with pytest.raises(AssertionError, match="structure differs"):
        compare.assert_same({}, a, "eval")


def test_a_model_passes_eval_train_and_compile_on_cpu():
    outs = run_model("hf/bert", "cpu", load_profile("cpu"), compile_backend="eager")
    assert [(o.variant, o.outcome) for o in outs] == [("eval", PASS), ("train", PASS), ("compile", PASS)]
    assert all(o.test_id == f"models::hf/bert::{o.variant}" and o.duration > 0 for o in outs)
