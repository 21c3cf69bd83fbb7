"""The shared contracts: outcome record, breakdown shape, config, CLI error handling."""
import json
import subprocess
import sys

import pytest

from torchconform.core.breakdown import breakdown, format_breakdown
from torchconform.core.outcome import (
    BACKEND_SKIP_KINDS, MESSAGE_LIMIT, OUTCOMES, Outcome, bound_message,
)
from torchconform.config import db_url, mask_password


def test_outcome_rejects_unknown_outcome_and_misplaced_kind():
    with pytest.raises(ValueError, match="unknown outcome"):
        Outcome("t", "passed")
    with pytest.raises(ValueError, match="needs a kind"):
        Outcome("t", "skip_backend")
    with pytest.raises(ValueError, match="only meaningful"):
        Outcome("t", "fail", kind="missing_op")


def test_outcome_round_trips_and_bounds_message():
    o = Outcome("a::b", "skip_backend", kind="missing_op", missing_op="aten::add.out",
                message="\n  first line\nsecond", fallback_ops=["aten::nonzero"])
    assert o.message == "first line"
    assert Outcome.from_dict(o.to_dict()) == o
    assert len(bound_message("x" * 5000)) == MESSAGE_LIMIT


def test_breakdown_counts_every_key_and_ranks_missing_ops():
    outs = [Outcome(f"t{i}", "skip_backend", kind="missing_op", missing_op="aten::b") for i in range(3)]
    outs += [Outcome("u", "skip_backend", kind="missing_op", missing_op="aten::a"),
             Outcome("v", "pass"), Outcome("w", "skip_eligibility")]
    b = breakdown("B1", outs)
    assert b["total"] == 6
    assert set(b["outcomes"]) == set(OUTCOMES)
    assert set(b["backend_skip_kinds"]) == set(BACKEND_SKIP_KINDS)
    assert b["missing_ops"] == [{"op": "aten::b", "tests": 3}, {"op": "aten::a", "tests": 1}]
    text = format_breakdown(b)
    assert "PyTorch eligibility" in text and "aten::b" in text
    json.dumps(b)  # JSON-ready


def test_db_url_defaults_and_password_masking(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHCONFORM_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    assert db_url(None) == f"sqlite:///{tmp_path}/torchconform.db"
    monkeypatch.setenv("TORCHCONFORM_DB", "postgresql+psycopg://u:s3cret@h/db")
    assert db_url(None).startswith("postgresql")
    masked = mask_password("could not connect to postgresql+psycopg://u:s3cret@h:5432/db")
    assert "s3cret" not in masked and "u:***@h:5432" in masked


def test_cli_version_json_and_unknown_command():
    out = subprocess.run([sys.executable, "-m", "torchconform", "version", "--json"],
                         capture_output=True, text=True, check=True)
    info = json.loads(out.stdout)
    import torch
    assert info["torch"] == torch.__version__
    bad = subprocess.run([sys.executable, "-m", "torchconform", "no-such-command"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
