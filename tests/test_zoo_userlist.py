"""A team's own model list: `sweep --models FILE` with model ids, Hugging Face config
files or folders of them, and Python files, resolved, built and classified."""
import json
import os
import subprocess
import sys

import pytest

from torchconform.errors import UserError
from torchconform.suites.models import userlist

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "docs", "examples", "team-models")


def test_the_shipped_example_expands_to_absolute_ids_of_every_kind():
    ids = userlist.expand(os.path.join(EXAMPLE, "models.txt"))
    base = os.path.abspath(EXAMPLE)
    assert ids[:2] == ["hf/bert", "hf/gpt2"]
    # the folder: one model per config.json below it, in path order
    assert ids[2:4] == [f"hfcfg/{base}/configs/llama-gqa/config.json", f"hfcfg/{base}/configs/t5-gated/config.json"]
    # the Python file: every model / model_* function; the one also named explicitly once
    assert ids[4:] == [f"py/{base}/my_models.py::{f}" for f in ("model", "model_mlp", "model_conv")]


def test_relative_paths_are_the_lists_not_the_working_directorys(tmp_path, monkeypatch):
    (tmp_path / "lists").mkdir()
    (tmp_path / "m.py").write_text("def model_a():\n    pass\n")
    (tmp_path / "c.json").write_text('{"model_type": "bert"}')
    listing = tmp_path / "lists" / "models.yaml"
    listing.write_text("models:\n  - ../m.py\n  - ../c.json\n  - py/../m.py::model_a\n  - tv/resnet18\n")
    monkeypatch.chdir("/")
    assert userlist.expand(str(listing)) == [f"py/{tmp_path}/m.py::model_a", f"hfcfg/{tmp_path}/c.json",
                                             "tv/resnet18"]


@pytest.mark.parametrize("entry, says", [
    ("nosuch/thing", "neither a model id"),
    ("missing.py", "not found"),
    ("empty.py", "defines no function named model"),
    ("broken.py", "line 1"),
    ("empty_dir", "holds no config.json"),
    ("c.json::f", "only a Python file takes ::FUNCTION"),
])
def test_a_bad_entry_is_one_clear_error(tmp_path, entry, says):
    (tmp_path / "empty.py").write_text("def helper():\n    pass\n")
    (tmp_path / "broken.py").write_text("def model(:\n")
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "c.json").write_text("{}")
    listing = tmp_path / "models.txt"
    listing.write_text(entry + "\n")
    with pytest.raises(UserError) as err:
        userlist.expand(str(listing))
    assert says in str(err.value) and entry in str(err.value) and "\n" not in str(err.value)


def test_a_config_file_keeps_its_architecture_and_shrinks_its_sizes(tmp_path):
    pytest.importorskip("transformers", reason="extra zoo: pip install 'torchconform[zoo]'")
    from torchconform.suites.models import catalog
    from torchconform.suites.models.spec import Unbuildable

    config = os.path.abspath(os.path.join(EXAMPLE, "configs", "llama-gqa", "config.json"))
    built = catalog.build(f"hfcfg/{config}")
    assert type(built.model).__name__ == "LlamaForCausalLM"   # architectures[0], with its head
    cfg = built.model.config
    assert cfg.rope_parameters["rope_theta"] == 500000.0 and cfg.tie_word_embeddings is False  # kept
    assert cfg.hidden_act == "silu"
    assert cfg.hidden_size < 4096 and cfg.num_hidden_layers < 32            # shrunk to run on CPU
    # still grouped-query attention, as the file's 32 query heads over 8 key/value heads
    assert cfg.num_key_value_heads < cfg.num_attention_heads
    assert cfg.num_attention_heads % cfg.num_key_value_heads == 0
    assert built.parameters < 10_000_000 and list(built.inputs) == ["input_ids"]
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(Unbuildable, match="names no model_type"):
        catalog.build(f"hfcfg/{bad}")


def test_sweep_models_file_runs_and_classifies_every_kind(tmp_path):
    pytest.importorskip("transformers", reason="extra zoo: pip install 'torchconform[zoo]'")
    db = tmp_path / "team.db"
    listing = tmp_path / "models.txt"
    example = os.path.abspath(EXAMPLE)
    listing.write_text(f"hf/bert\n{example}/configs/llama-gqa\n{example}/my_models.py::model\n"
                       f"{tmp_path}/unbuildable.json\n")
    (tmp_path / "unbuildable.json").write_text('{"model_type": "no-such-architecture"}')
    cmd = [sys.executable, "-m", "torchconform", "sweep", "--models", str(listing), "--device", "refdev",
           "--variants", "eval,train", "--build", "team", "--db", str(db), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["total"] == 8 and summary["outcomes"]["skip_eligibility"] == 2  # the unknown model_type
    from torchconform.db import read_rows
    from torchconform.db.opening import open_store

    with open_store(str(db)) as store:
        ids = {o.test_id: o for o in read_rows.iter_outcomes(store, "team")}
    assert "no-such-architecture" in ids[f"models::hfcfg/{tmp_path}/unbuildable.json::eval"].message
    for variant in ("eval", "train"):
        assert ids[f"models::py/{example}/my_models.py::model::{variant}"].outcome == "pass"
        # refdev's default profile lacks aten::cos: the llama config's rotary embedding needs it
        llama = ids[f"models::hfcfg/{example}/configs/llama-gqa/config.json::{variant}"]
        assert (llama.outcome, llama.kind, llama.missing_op) == ("skip_backend", "missing_op", "aten::cos.out")
        assert ids[f"models::hf/bert::{variant}"].outcome in ("pass", "skip_backend")


def test_models_flag_errors_are_one_line_and_store_nothing(tmp_path):
    db = tmp_path / "x.db"
    base = [sys.executable, "-m", "torchconform", "sweep", "--build", "b", "--db", str(db)]
    for extra, says in ((["--models", str(tmp_path / "nope.txt")], "not found"),
                        (["--models", __file__, "--selection", "full"], "pass one of them"),
                        (["--models", __file__, "--suite", "ops"], "drop it for --suite ops")):
        proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and says in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not db.exists()
