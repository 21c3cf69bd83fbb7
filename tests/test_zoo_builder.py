"""The Hugging Face tiny-config builder, selections, comparisons: in-process, seconds."""
import os
import socket

import pytest
import torch

pytest.importorskip("transformers", reason="extra zoo: pip install 'torchconform[zoo]'")

from torchconform.core.outcome import PASS, SKIP_ELIGIBILITY  # noqa: E402
from torchconform.errors import UserError  # noqa: E402
from torchconform.core.profile import load_profile  # noqa: E402
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


def test_required_forward_arguments_become_inputs_with_patch_grids():
    # glm4v_vision inherits main_input_name "input_ids" but its forward takes
    # flattened patches and their grid: both come from the generic rules.
    built = hf.build("glm4v_vision")
    assert set(built.inputs) == {"hidden_states", "grid_thw"}
    config = built.model.config
    t, h, w = built.inputs["grid_thw"][0].tolist()
    assert (h % config.spatial_merge_size, w % config.spatial_merge_size) == (0, 0)
    width = config.in_channels * config.temporal_patch_size * config.patch_size ** 2
    assert tuple(built.inputs["hidden_states"].shape) == (t * h * w, width)


def test_generic_extra_inputs_dual_encoders_and_encoder_decoders():
    # a dual encoder gets image and text; an encoder-decoder without an
    # override entry gets decoder tokens
    assert "clip" not in hf._overrides() and "switch_transformers" not in hf._overrides()
    clip = hf.build("clip").inputs
    assert set(clip) == {"input_ids", "pixel_values"} and clip["pixel_values"].shape[:2] == (2, 3)
    assert set(hf.build("switch_transformers").inputs) == {"input_ids", "decoder_input_ids"}
    # a model with an image placeholder token splices images into the text:
    # text-only, so the image count never has to match the placeholders
    from torchconform.suites.models import hf_inputs

    rule = next(r for r in hf._rules()["extra_inputs"] if r["input"] == "pixel_values")
    llava = hf.make_config("llava")
    assert not hf_inputs._matches(rule, llava, {"input_ids", "pixel_values"})


def test_input_specs_from_data_resolve_config_attributes():
    from transformers import PretrainedConfig

    from torchconform.suites.models import hf_inputs

    config = PretrainedConfig()
    config.encoder_config = PretrainedConfig()
    config.encoder_config.num_mel_bins = 80
    config.patch_size = 14
    shape = hf._rules()["inputs"]
    g = torch.Generator().manual_seed(0)
    feats = hf_inputs.from_spec("input_features", {"shape": ["batch", 64, "encoder_config.num_mel_bins"]},
                                config, shape, g)
    assert tuple(feats.shape) == (2, 64, 80) and feats.is_floating_point()
    patches = hf_inputs.from_spec("pixel_values", {"shape": [16, "3*2*patch_size*patch_size"]}, config, shape, g)
    assert tuple(patches.shape) == (16, 1176)
    mask = hf_inputs.from_spec("mask", {"shape": ["batch", "seq_len"], "kind": "ones"}, config, shape, g)
    assert mask.dtype == torch.long and mask.sum() == 16
    unpadded = hf_inputs.from_spec("audio_mel_mask", {"shape": ["batch", 32], "kind": "no_padding"}, config, shape, g)
    assert unpadded.dtype == torch.bool and tuple(unpadded.shape) == (2, 32) and not unpadded.any()
    boxes = hf_inputs.from_spec("bbox", {"shape": ["batch", "seq_len", 4], "kind": "boxes"}, config, shape, g)
    assert bool((boxes[..., 2] >= boxes[..., 0]).all() and (boxes[..., 3] >= boxes[..., 1]).all())
    assert hf_inputs.from_spec("g", {"value": [[1, 4, 4]]}, config, shape, g).tolist() == [[1, 4, 4]]
    with pytest.raises(Unbuildable, match="not an integer config attribute"):
        hf_inputs.from_spec("x", {"shape": ["no_such_attribute"]}, config, shape, g)


def test_a_time_major_speech_encoder_builds_from_its_override():
    built = hf.build("parakeet_encoder")
    assert tuple(built.inputs["input_features"].shape) == (2, 64, built.model.config.num_mel_bins)


def test_fill_none_and_dotted_overrides():
    # hunyuan reads head_dim straight from the config, whose default is None
    assert hf.make_config("hunyuan_v1_dense").head_dim == 8
    # a dotted override reaches a sub-config and a dict inside it
    config = hf.make_config("qwen2_5_vl")
    assert config.text_config.rope_parameters["mrope_section"] == [1, 1, 2]
    assert config.text_config.rope_parameters["rope_type"] == "default"  # the rest of the dict kept
    # YAML lists become tuples where the config holds a tuple
    assert hf.make_config("reformer").axial_pos_shape == (2, 4)


def test_init_overrides_reach_the_config_constructor_and_are_shrunk(monkeypatch):
    # DETR builds a timm backbone unless its constructor is given a backbone config
    monkeypatch.setattr(hf, "_overrides", lambda: {"detr": {"init": {"backbone_config": {"model_type": "resnet"}}}})
    config = hf.make_config("detr")
    from transformers import AutoConfig

    assert AutoConfig.for_model("detr").backbone_config.model_type == "timm_backbone"
    assert config.backbone_config.model_type == "resnet"
    assert set(config.backbone_config.depths) == {1}   # the generic rules reached it


def test_a_type_the_auto_mapping_cannot_resolve_builds_the_class_it_lists():
    from transformers import AutoModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    config = hf.make_config("evolla")   # its config class is registered under two names
    with pytest.raises(ValueError):
        AutoModel.from_config(config)
    assert type(hf._base_model(config)).__name__ == MODEL_MAPPING_NAMES["evolla"]


def test_rope_sections_are_rescaled_to_the_shrunk_head():
    from transformers import PretrainedConfig

    config = PretrainedConfig()
    config.hidden_size, config.num_attention_heads = 512, 4
    config.rope_parameters = {"rope_type": "default", "mrope_section": [24, 20, 20]}
    hf.shrink_config(config)
    assert sum(config.rope_parameters["mrope_section"]) == (32 // 4) // 2
    assert hf._split_evenly([16, 24, 24], 2) == [0, 1, 1]


def test_expected_file_accounts_for_every_model_type():
    from torchconform.suites.models import coverage

    expected = coverage.expected()
    covered, not_covered = expected["covered"], expected["not_covered"]
    assert not set(covered) & set(not_covered)
    assert sorted(set(covered) | set(not_covered)) == hf.model_types()
    assert len(covered) + len(not_covered) == expected["model_types"]
    assert all(isinstance(why, str) and 0 < len(why) <= 160 for why in not_covered.values())


def test_a_partial_sweep_updates_only_the_types_it_ran():
    from torchconform.suites.models import coverage

    pinned = {"covered": ["a", "b"], "not_covered": {"c": "build: x", "d": "cpu run: y"}}
    merged, changed = coverage.merge_update(pinned, covered=["c"], not_covered={"b": "train fail: z"},
                                            ran={"b", "c"})
    assert merged == {"covered": ["a", "c"], "not_covered": {"b": "train fail: z", "d": "cpu run: y"}}
    assert changed == {"b": ("covered", "not covered"), "c": ("not covered", "covered")}
    # a type run again with the same status is not a change; one not run keeps its reason
    merged, changed = coverage.merge_update(pinned, covered=["a"], not_covered={"d": "cpu run: new"}, ran={"a", "d"})
    assert changed == {} and merged["not_covered"] == {"c": "build: x", "d": "cpu run: new"}


def test_the_pin_is_left_alone_for_a_missing_store_or_build(tmp_path):
    from torchconform.db.opening import open_store
    from torchconform.suites.models import coverage

    pin = coverage.path_for(hf.version())
    before = open(pin, encoding="utf-8").read()
    with pytest.raises(UserError, match="no database"):
        coverage.main([str(tmp_path / "none.db"), "cov"])
    assert not (tmp_path / "none.db").exists()
    open_store(str(tmp_path / "empty.db")).close()
    with pytest.raises(UserError, match="unknown build 'cov'"):
        coverage.main([str(tmp_path / "empty.db"), "cov", "--update"])
    assert open(pin, encoding="utf-8").read() == before


NOISY_MODEL = '''
import torch

class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        mask = (torch.rand_like(x) > 0.5).float()   # random masking in forward, as vit_mae does
        return self.lin(x * mask)

def model():
    return Noisy(), {"x": torch.randn(4, 8)}
'''


@pytest.mark.parametrize("warm_calls", [0, 2])
def test_warm_timing_calls_do_not_change_what_is_compared(tmp_path, warm_calls):
    """The compared result is each run's first call, traced or not, however many warm calls
    follow (a model drawing random numbers in forward gets other gradients from each)."""
    from torchconform.core.notes import parse_timing_note
    from torchconform.core.profile import load_profile
    from torchconform.suites.models.catalog import library_version
    from torchconform.suites.models.check import run_model

    path = tmp_path / "noisy.py"
    path.write_text(NOISY_MODEL)
    model_id = f"py/{path}::model"
    import torch

    for traced in ((), [(v, torch.__version__, library_version(model_id)) for v in ("eval", "train")]):
        outs = run_model(model_id, "cpu", load_profile("cpu"), variants=("eval", "train"), traced=traced,
                         warm_calls=warm_calls)
        assert [(o.variant, o.outcome) for o in outs] == [("eval", "pass"), ("train", "pass")], \
            [o.message for o in outs]
        timing = parse_timing_note(outs[1].message)
        assert timing["warm_calls"] == warm_calls and (timing["device_warm_s"] is None) == (warm_calls == 0)
