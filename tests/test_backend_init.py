"""Onboarding a PrivateUse1 backend (issue 29): profiles documented and linted, probed
defaults without a profile, `backend init`, torch's autoload, the device brought up before
anything is stored, build names from the profile's keys, the CLI's own flags in errors,
the backend's distribution version, and a repro environment without this machine's paths.

The autoload backend is a stand-in installed by a dist-info folder on PYTHONPATH: refdev
registered under the name 'fakedev' by a `torch.backends` entry point, whose package
imports torch at its top as real autoload backends do."""
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from support import child_env
from torchconform.errors import UserError
from torchconform.core import profile_schema
from torchconform.core.backend_env import distribution_of, portable_path, repro_environment
from torchconform.skiplists.lint import lint
from torchconform.core.profile import BackendProfile, load_profile

ROOT = Path(__file__).resolve().parents[1]
TC = [sys.executable, "-m", "torchconform"]


def tc(*args, cwd, env=None, timeout=600):
    return subprocess.run([*TC, *map(str, args)], cwd=cwd, env=env or child_env(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def fake_backend(tmp_path_factory) -> Path:
    """A folder for PYTHONPATH holding package tcfakedev and distribution tcfakedev-backend 1.2.3."""
    site = tmp_path_factory.mktemp("fakesite")
    (site / "tcfakedev").mkdir()
    (site / "tcfakedev" / "__init__.py").write_text(
        "import os\nimport torch  # noqa: F401  (an autoload backend imports torch first thing)\n"
        "__version__ = '0.0.0-module'   # not the distribution's version\n\n"
        "def _autoload():\n    from torchconform import refdev\n\n"
        "    saved = os.environ.get('TORCHCONFORM_REFDEV_NAME')\n"
        "    os.environ['TORCHCONFORM_REFDEV_NAME'] = 'fakedev'   # refdev reads its name here, once\n"
        "    try:\n        refdev.load()\n    finally:\n"
        "        os.environ.pop('TORCHCONFORM_REFDEV_NAME')\n"
        "        if saved is not None:\n            os.environ['TORCHCONFORM_REFDEV_NAME'] = saved\n")
    info = site / "tcfakedev_backend-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tcfakedev-backend\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[torch.backends]\nfakedev = tcfakedev:_autoload\n")
    (info / "top_level.txt").write_text("tcfakedev\n")
    return site


def with_fake(site: Path, **extra) -> dict:
    return child_env(PYTHONPATH=str(site), **extra)


# -- the profile format: documented, checked with file:line -----------------------------
def test_every_profile_key_is_documented():
    text = (ROOT / "docs" / "profiles.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", text, re.M))
    keys = set(profile_schema.KEYS) | set(profile_schema.DTYPE_POLICY_KEYS) | set(profile_schema.DISTRIBUTED_KEYS) \
        | set(profile_schema.TRACKING_KEYS) | set(profile_schema.CLAIMS_KEYS)
    assert keys - documented == set(), "profile keys missing from docs/profiles.md"
    assert documented - keys == set(), "docs/profiles.md documents keys the schema does not have"


def test_shipped_profiles_lint_clean_and_a_bad_one_is_reported_by_line(tmp_path):
    shipped = sorted(str(p) for p in (ROOT / "skiplists").glob("*/profile.yaml"))
    assert len(shipped) >= 4 and lint(shipped) == []
    bad = tmp_path / "mine.yaml"   # not named profile.yaml: recognised by its device key
    bad.write_text("device: npu\ncompile_backend: 3\ncolour: red\nmissing_op_patterns:\n  - 'no group'\n"
                   "dtype_policy:\n  unsupported: [complex64, nosuch]\ndistributed:\n  ranks_per_host: -1\n"
                   "env:\n  A: [1]\n")
    problems = lint([str(bad)])
    expected = [(2, "compile_backend must be text, got int 3"), (3, "unknown key 'colour' (allowed: name, device,"),
                (5, "missing_op_patterns pattern 'no group' needs a (?P<op>...) group"),
                (7, "dtype_policy.unsupported: unknown dtype 'nosuch'"),
                (9, "distributed.ranks_per_host must be a whole number"), (11, "env.A must be a single value")]
    assert [(p.line, p.code) for p in problems] == [(line, "profile") for line, _ in expected]
    for p, (_, start) in zip(problems, expected):
        assert p.message.startswith(start), p.message
    with pytest.raises(UserError) as err:
        load_profile(str(bad))
    message = str(err.value)
    assert message.startswith(f"backend profile {bad}:2: compile_backend must be text") and "5 more" in message


def test_lint_cli_checks_a_backend_folder_with_its_profile(cli, tmp_path):
    folder = tmp_path / "mybackend"
    folder.mkdir()
    (folder / "profile.yaml").write_text("device: mine\ncompile_backnd: aot_eager\n")
    code, out, err = cli("skiplist", "lint", folder)
    assert code == 1
    assert out.strip() == (f"{folder / 'profile.yaml'}:2: error: [profile] unknown key 'compile_backnd' (did you mean "
                           "'compile_backend'?); every key: docs/profiles.md")
    assert "1 file(s): 1 error(s)" in err


# -- defaults, names --------------------------------------------------------------------
def test_compile_backend_defaults_to_aot_eager_off_the_inductor_devices(tmp_path):
    assert BackendProfile(name="x", device="npu").compile_backend == "aot_eager"
    assert BackendProfile(name="x", device="cuda").compile_backend == "inductor"
    assert BackendProfile(name="x", device="cpu").compile_backend == "inductor"
    path = tmp_path / "profile.yaml"
    path.write_text("device: npu\n")
    assert load_profile(str(path)).compile_backend == "aot_eager"
    path.write_text("device: npu\ncompile_backend: npu_graph\n")
    assert load_profile(str(path)).compile_backend == "npu_graph"


def test_profiles_are_named_by_their_keys_never_their_file(tmp_path):
    from torchconform.cli.main import build_parser
    from torchconform.skiplists.backend_setup import profile_label

    path = tmp_path / "profile.yaml"
    path.write_text("device: npu\n")
    assert load_profile(str(path)).name == "npu"
    args = build_parser().parse_args(["run", "--device", "npu", "--profile", str(path)])
    assert profile_label(args) == "npu"
    path.write_text("device: npu\nname: npu-eager\n")
    args = build_parser().parse_args(["run", "--device", "npu", "--profile", str(path)])
    assert profile_label(args) == "npu-eager"
    assert load_profile("cuda").name == "cuda"   # shipped ones keep their names


def test_probed_compile_backend_and_the_written_yaml():
    from torchconform.skiplists.profile_init import pick_compile_backend, render_profile

    assert pick_compile_backend("cuda", {"inductor": "ok", "aot_eager": "ok"}) == "inductor"
    assert pick_compile_backend("npu", {"inductor": "ok", "aot_eager": "ok"}) == "aot_eager"   # never inductor
    assert pick_compile_backend("npu", {"npu": "ok", "aot_eager": "ok"}) == "npu"   # the backend's own
    assert pick_compile_backend("npu", {"npu": "RuntimeError: x", "aot_eager": "wrong result", "eager": "ok"}) == "eager"
    assert pick_compile_backend("npu", {}) == "aot_eager"
    data = {"name": "npu", "device": "npu", "description": "yes: 'quoted' \\ # not a comment",
            "missing_op_patterns": ["(?P<op>aten::[\\w.]+) is not supported: \"x\""], "compile_backend": "true",
            "env": {"A": "1.5", "B": ""}, "dtype_policy": {"unsupported": [], "downcast": {"float64": "float32"}},
            "distributed": {"c10d_backend": "", "ranks_per_host": 0, "device_env": "",
                            "missing_collective_patterns": []}}
    text = render_profile(data, {"compile_backend": ["ran: npu"]}, ["header"])   # refuses a text that differs
    assert "# probe: ran: npu\ncompile_backend: " in text


def test_plugin_flags_are_said_as_the_cli_flags():
    from torchconform.skiplists.backend_setup import cli_wording

    text = ("device 'x': cannot import backend module (No module named 'y'); install it or pass --tc-backend-module; "
            "see --tc-profile, --tc-skiplist-audit and --tc-sweep-shards")
    assert cli_wording(text) == ("device 'x': cannot import backend module (No module named 'y'); install it or pass "
                                 "--backend-module; see --profile, --skiplist-audit and --tc-sweep-shards")


# -- the installed backend's name and environment ---------------------------------------
def test_backend_version_comes_from_its_distribution(fake_backend, monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(fake_backend))
    importlib.invalidate_caches()
    assert distribution_of("tcfakedev") == ("tcfakedev-backend", "1.2.3")
    assert distribution_of("tcfakedev.sub.module") == ("tcfakedev-backend", "1.2.3")
    assert distribution_of("torchconform.refdev")[0] == "torchconform"
    assert distribution_of("no_such_module_q") == ("", "")


def test_repro_environment_carries_no_machine_paths(tmp_path):
    root, home = tmp_path / "repo", tmp_path / "home"
    (root / "third_party" / "be").mkdir(parents=True)
    (home / "src" / "be").mkdir(parents=True)
    env = {"HOME": str(home), "PYTHONPATH": os.pathsep.join(
        [str(root / "third_party" / "be"), str(home / "src" / "be"), "/opt/elsewhere/lib"])}
    words = repro_environment({"NPU_VISIBLE": "0 1"}, str(root), env)
    assert words == ["NPU_VISIBLE='0 1'", "PYTHONPATH=third_party/be:$HOME/src/be"]
    assert portable_path("/opt/elsewhere/lib", str(root), env) == ""
    # a shell on another machine, in its own checkout, gets working paths back
    other_home = tmp_path / "other"
    shown = subprocess.run(["bash", "-c", " ".join(words) + " bash -c 'echo $NPU_VISIBLE; echo $PYTHONPATH'"],
                           cwd=root, env={"HOME": str(other_home), "PATH": os.environ["PATH"]}, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert shown == ["0 1", f"third_party/be:{other_home}/src/be"]
    assert str(tmp_path) not in " ".join(words)


# -- real processes ---------------------------------------------------------------------
def test_backend_init_refdev_writes_a_profile_lint_and_run_accept(tmp_path):
    from torchconform import refdev

    out = tmp_path / "refdev.yaml"
    proc = tc("backend", "init", "refdev", "--module", "torchconform.refdev", "-o", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith(f"wrote {out}: compile_backend refdev")
    assert lint([str(out)]) == []
    profile = load_profile(str(out))
    truth = refdev.describe()
    assert (profile.name, profile.device, profile.backend_module, profile.setup) == \
        ("refdev", "refdev", "torchconform.refdev", "torchconform.refdev:load_traced")  # the shipped profile's
    # set-up: load with the kernel trace on, for the coverage audit (refdev.load_traced)
    assert profile.compile_backend == "refdev"          # refdev's own backend ran the probe's function
    assert profile.distributed["c10d_backend"] == "refccl"
    assert profile.unsupported_dtypes == set(truth["traits"]["unsupported_dtypes"])
    assert ("float64" in profile.dtype_policy.get("downcast", {})) is truth["traits"]["float64_as_float32"]
    text = out.read_text()
    assert "# probe: inductor: InductorError" in text and "boxed CPU fallback not registered" in text
    again = tc("backend", "init", "refdev", "--module", "torchconform.refdev", "-o", out, cwd=tmp_path)
    assert again.returncode == 2 and "exists; pass --force" in again.stderr
    run = tc("run", "--device", "refdev", "--profile", out, "--suite", "ops", "--selection", "quick", "--ops", "add",
             "-k", "float32 and compare_cpu_add", "-n", "0", "--no-db", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(run.stdout)
    assert data["build"].startswith("refdev-refdev-") and data["total"] == 2 and data["outcomes"]["pass"] == 2


def test_autoload_backend_runs_without_a_profile(tmp_path, fake_backend):
    db = tmp_path / "store.db"
    proc = tc("run", "--device", "fakedev", "--backend-module", "tcfakedev", "--ops", "add", "-k",
              "float32 and compare_cpu_add", "-n", "0", "--db", db, "--json", cwd=tmp_path, env=with_fake(fake_backend))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Failed to load the backend extension" not in proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if "no profile for" in ln]
    assert len(said) == 1 and said[0].startswith("torchconform: no profile for 'fakedev': probed defaults "
                                                 "(compile_backend aot_eager, backend_module (autoload)")
    data = json.loads(proc.stdout)
    assert data["build"].startswith("fakedev-fakedev-") and data["outcomes"]["pass"] == 2
    written = load_profile(str(tmp_path / ".torchconform" / "profiles" / "fakedev.yaml"))
    assert written.backend_module == "" and written.compile_backend == "aot_eager"
    assert "tcfakedev-backend 1.2.3" in written.description
    with sqlite3.connect(db) as conn:
        assert conn.execute("select device, profile from builds").fetchall() == [("fakedev", "fakedev")]


def test_refdev_runs_beside_an_autoload_backend_and_doctor_lists_both(tmp_path, fake_backend):
    env = with_fake(fake_backend)
    proc = tc("run", "--device", "refdev", "--ops", "add", "-k", "float32 and compare_cpu_add", "-n", "0", "--no-db",
              "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torchconform: TORCH_DEVICE_BACKEND_AUTOLOAD=0 for this run: torch's autoload of fakedev keeps 'refdev' " \
           "from coming up" in proc.stderr
    assert json.loads(proc.stdout)["outcomes"]["pass"] == 2
    doctor = tc("doctor", "--json", "--db", tmp_path / "x.db", cwd=tmp_path, env=env)
    info = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and info["ok"], info["problems"]
    assert info["devices"]["fakedev"] >= 1 and info["devices"]["refdev"] >= 1 and info["devices"]["cpu"] == 1
    assert info["backends"] == [{"device": "fakedev", "module": "", "registered_by": "autoload",
                                 "distribution": "tcfakedev-backend", "version": "1.2.3"}]
    assert info["database"] == f"sqlite:///{tmp_path / 'x.db'} (no file yet: the first stored run creates it)"


def test_a_backend_that_does_not_come_up_stores_nothing(tmp_path):
    db = tmp_path / "store.db"
    proc = tc("run", "--device", "ghostdev", "--backend-module", "json", "--ops", "add", "-n", "2", "--db", db,
              cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "torchconform: error: device 'ghostdev' is not registered (PrivateUse1 is 'privateuseone'): importing json "
        "did not register it; pass --backend-module naming the module that registers it, or a --profile whose "
        "backend_module/setup do"]
    assert not db.exists()   # no build, not even an empty store
    assert not (tmp_path / ".torchconform" / "runs").exists()


def test_an_upstream_repro_collects_its_test_with_the_suites_options(tmp_path):
    """The runner's repro today names the test but not the upstream suite's pytest options,
    so the test is not found (its class is generated under another name without the
    suite's plugin); collection_options keeps them, repro_command writes portable paths."""
    import shutil

    from torchconform.core.backend_env import collection_options, repro_command
    from torchconform.suites import upstream

    src = tmp_path / "pytorch"
    shutil.copytree(ROOT / "tests" / "fixtures" / "upstream" / "test", src / "test")
    (src / "version.txt").write_text("2.13.0a0\n")
    suite_args = upstream.pytest_args(str(src), files="test_fake_ops", check_version=False)
    options = collection_options(suite_args + ["-p", "no:cacheprovider", "--tc-device", "refdev", "-n", "2"])
    assert options == ["-c", upstream.INI, "--rootdir", str(src), "-p", upstream.PLUGIN,
                       "-p", "torchconform.collectors.skiplist_plugin", "--noconftest"]
    node = f"{src / 'test' / 'test_fake_ops.py'}::TestFakeCommonREFDEV::test_fake_add_scalar_refdev"
    env = child_env(TORCHCONFORM_PYTORCH_SRC=str(src))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]   # `python` is this one
    plugin = ["--tc-device", "refdev", "--tc-profile", "refdev"]
    cmd = repro_command(node, options + plugin, {}, root=str(ROOT), environ=env)
    assert str(tmp_path) not in cmd and str(ROOT) not in cmd
    assert cmd.startswith("python -m pytest $TORCHCONFORM_PYTORCH_SRC/test/test_fake_ops.py::TestFakeCommonREFDEV::"
                          "test_fake_add_scalar_refdev -c suites/upstream/pytest.ini "
                          "--rootdir $TORCHCONFORM_PYTORCH_SRC ")
    ran = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]
    bare = repro_command(node, plugin, {}, root=str(ROOT), environ=env)   # what the runner records today
    ran = subprocess.run(["bash", "-c", bare], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 4 and "not found" in ran.stdout + ran.stderr
