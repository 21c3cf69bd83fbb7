"""torchconform.settings: one table of every TORCHCONFORM_* variable (issue 32).

The table cannot drift: every name any file of the repository mentions is declared, every
read of one goes through the module, and docs/settings.md is the table as generated."""
from __future__ import annotations

import ast
import os
import re
import subprocess

import pytest

from torchconform import settings
from torchconform.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = re.compile(r"TORCHCONFORM_[A-Z0-9_]+")
SCANNED = (".py", ".sh", ".yaml", ".yml", ".md", ".toml")
# Words that look like a variable and are not one.
NOT_VARIABLES = {
    "TORCHCONFORM_PROBE": "the line marker skiplists/probe.py prints before its JSON answer",
}


def _files(suffixes) -> list[str]:
    """The repository's files (tracked, and new ones git does not ignore) outside tests/."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [f for f in out if f.endswith(suffixes) and not f.startswith("tests/") and os.path.isfile(os.path.join(ROOT, f))]


def _read(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
        return fh.read()


def test_every_mentioned_name_is_declared():
    missing = {}
    for rel in _files(SCANNED):
        for name in NAME.findall(_read(rel)):
            if name.endswith("_"):        # a prefix, as in TORCHCONFORM_REFDEV_*
                assert any(n.startswith(name) for n in settings.SETTINGS), (rel, name)
            elif name not in settings.SETTINGS and name not in NOT_VARIABLES:
                missing.setdefault(name, rel)
    assert not missing, f"declare these in torchconform/settings.py: {missing}"


def test_every_setting_says_what_it_means():
    assert len(settings.SETTINGS) >= 40
    for name, s in settings.SETTINGS.items():
        assert s.name == name and NAME.fullmatch(name)
        assert s.meaning.strip() and "\n" not in s.meaning, name
        assert s.default is None or isinstance(s.default, str), name
        assert s.kind in ("str", "int", "float", "switch", "path", "paths", "list", "choice", "json", "url"), name


def test_undeclared_name_cannot_be_read(monkeypatch):
    monkeypatch.setenv("TORCHCONFORM_NOT_DECLARED", "1")
    for read in (settings.get, settings.given, settings.default, settings.is_on, settings.get_int):
        with pytest.raises(KeyError, match="SETTINGS"):
            read("TORCHCONFORM_NOT_DECLARED")


def test_get_gives_the_environment_else_the_default(monkeypatch):
    monkeypatch.delenv("TORCHCONFORM_SELECTION", raising=False)
    assert settings.get("TORCHCONFORM_SELECTION") == "quick"
    assert settings.given("TORCHCONFORM_SELECTION") is None
    monkeypatch.setenv("TORCHCONFORM_SELECTION", "")        # empty counts as unset
    assert settings.get("TORCHCONFORM_SELECTION") == "quick"
    assert settings.given("TORCHCONFORM_SELECTION") is None
    monkeypatch.setenv("TORCHCONFORM_SELECTION", "full")
    assert settings.get("TORCHCONFORM_SELECTION") == "full"
    assert settings.get("TORCHCONFORM_SELECTION", {}) == "quick"   # another environment
    assert settings.is_on("TORCHCONFORM_REFDEV_TRACE", {"TORCHCONFORM_REFDEV_TRACE": "1"})
    assert not settings.is_on("TORCHCONFORM_REFDEV_TRACE", {})


def test_bad_whole_number_is_one_line_user_error(monkeypatch):
    monkeypatch.setenv("TORCHCONFORM_PERF_CALLS", "five")
    with pytest.raises(UserError) as info:
        settings.get_int("TORCHCONFORM_PERF_CALLS", 1, 1000, what="a call count")
    assert str(info.value) == ("TORCHCONFORM_PERF_CALLS='five' is not a call count; "
                               "set it to a whole number from 1 to 1000 (default 5)")
    monkeypatch.setenv("TORCHCONFORM_PERF_CALLS", "0")          # out of range
    with pytest.raises(UserError, match="from 1 to 1000"):
        settings.get_int("TORCHCONFORM_PERF_CALLS", 1, 1000)
    monkeypatch.setenv("TORCHCONFORM_PERF_CALLS", "7")
    assert settings.get_int("TORCHCONFORM_PERF_CALLS", 1, 1000) == 7
    monkeypatch.delenv("TORCHCONFORM_PERF_CALLS")
    assert settings.get_int("TORCHCONFORM_PERF_CALLS", 1, 1000) == 5


def test_readers_keep_their_one_line_errors(monkeypatch):
    from torchconform import refdev
    from torchconform.suites.distributed import launch

    monkeypatch.setenv("TORCHCONFORM_REFDEV_DEVICES", "many")
    with pytest.raises(UserError, match=r"^TORCHCONFORM_REFDEV_DEVICES='many' is not a device count; "
                                        r"set it to a whole number from 1 to 16 \(default 2\)$"):
        refdev._device_count()
    monkeypatch.setenv("TORCHCONFORM_REFDEV_DEVICES", "3")
    assert refdev._device_count() == 3
    monkeypatch.setenv("TORCHCONFORM_WORLD_SIZE", "0")
    with pytest.raises(UserError, match="TORCHCONFORM_WORLD_SIZE='0' is not a rank count"):
        launch.world_size()
    monkeypatch.setenv("TORCHCONFORM_DIST_TIMEOUT", "soon")
    with pytest.raises(UserError, match="use seconds"):
        launch.rank_timeout()
    monkeypatch.delenv("TORCHCONFORM_WORLD_SIZE")
    monkeypatch.delenv("TORCHCONFORM_DIST_TIMEOUT")
    assert (launch.world_size(), launch.rank_timeout()) == (2, 120.0)


def test_module_constants_match_the_table():
    from torchconform import config, refdev
    from torchconform.refdev import profiles
    from torchconform.suites.distributed import launch

    d = settings.default
    assert d(config.DB_ENV) == config.DEFAULT_DB
    assert d(refdev.NAME_ENV) == refdev.DEFAULT_NAME
    assert d(refdev.DEVICES_ENV) == str(refdev.DEFAULT_DEVICES)
    assert d(refdev.PROFILE_ENV) == profiles.DEFAULT_PROFILE
    assert d(launch.WORLD_SIZE_ENV) == str(launch.DEFAULT_WORLD_SIZE)
    assert float(d(launch.TIMEOUT_ENV)) == launch.DEFAULT_TIMEOUT
    from torchconform.suites.perf import measure

    assert d(measure.CALLS_ENV) == str(measure.DEFAULT_CALLS)
    assert d(measure.THREADS_ENV) == str(measure.DEFAULT_THREADS)


def test_plugin_options_are_declared_and_leave_defaults_to_ini():
    from torchconform.collectors.session import OPTIONS

    for dest, (flag, env, _help) in OPTIONS.items():
        assert env in settings.SETTINGS, (dest, env)
        assert flag in settings.SETTINGS[env].flag, (dest, flag)


def _string_constants() -> dict[str, str]:
    """Module-level NAME = "TORCHCONFORM_..." assignments anywhere in the package."""
    found = {}
    for rel in _files((".py",)):
        for node in ast.parse(_read(rel)).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) and NAME.fullmatch(node.value.value):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = node.value.value
    return found


def _reads(tree, constants) -> list[tuple[int, str]]:
    """(line, variable) of every os.environ.get / os.getenv / os.environ[...] read of a
    TORCHCONFORM_* variable, named literally or by a module constant."""
    def named(arg):
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value if arg.value.startswith("TORCHCONFORM_") else None
        key = arg.id if isinstance(arg, ast.Name) else arg.attr if isinstance(arg, ast.Attribute) else None
        return constants.get(key)

    def is_environ(node):
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
               (isinstance(node, ast.Name) and node.id == "environ")

    out = []
    for node in ast.walk(tree):
        arg = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f = node.func
            if (f.attr == "get" and is_environ(f.value)) or (f.attr == "getenv" and isinstance(f.value, ast.Name)
                                                              and f.value.id == "os"):
                arg = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_environ(node.value):
            arg = node.slice
        name = named(arg) if arg is not None else None
        if name:
            out.append((node.lineno, name))
    return out


def test_variables_are_read_through_settings_only():
    constants = _string_constants()
    stray = []
    for rel in _files((".py",)):
        if rel == "torchconform/settings.py":
            continue
        reads = _reads(ast.parse(_read(rel)), constants)
        stray += [f"{rel}:{line} {name}" for line, name in reads]
    assert not stray, "read these through torchconform.settings (get/given): " + ", ".join(stray)


def test_docs_list_every_setting():
    text = _read("docs/settings.md")
    for name in settings.SETTINGS:
        assert f"`{name}`" in text, name
    assert settings.markdown() in text, "regenerate the table: python -m torchconform.settings"
