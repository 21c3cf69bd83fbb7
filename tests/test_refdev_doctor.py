"""``torchconform doctor``: what it reports, and that passwords never show."""
import json

from torchconform.cli.main import main


def test_doctor_json(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHCONFORM_DB", "postgresql://tc:s3cret@db.example:5432/results")
    code = main(["doctor", "--json"])
    info = json.loads(capsys.readouterr().out)
    assert code == (0 if info["ok"] else 1)
    assert info["torch"].startswith("2.")
    assert info["compiler"] and info["ninja"]
    assert info["database"] == "postgresql://tc:***@db.example:5432/results"
    assert "s3cret" not in json.dumps(info)
    from torchconform import refdev

    name = refdev.load()
    assert info["devices"][name] >= 1 and info["devices"]["cpu"] == 1
    assert info["ok"] and info["problems"] == []


def test_doctor_reports_missing_compiler(capsys, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    code = main(["doctor", "--no-device"])
    out = capsys.readouterr().out
    assert code == 1
    assert "compiler          NOT FOUND" in out
    assert "problem: no C++ compiler (/nonexistent/c++); install g++ or set $CXX" in out
    assert out.rstrip().endswith("NOT OK")
