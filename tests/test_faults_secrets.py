"""Faults: a database password never reaches a stored or printed text.

The URLs carry passwords with '/', '?' and '@' (``tc:S3cr/et?pw@host``): what a user
means is everything between the first ':' after '//' and the last '@'.  A throwaway
PostgreSQL server (tests/pg.py) gets two roles that log in with those passwords
(scram-sha-256, so a mis-parsed password cannot connect); every command that takes
``--db`` then runs in a child process, and every place a command or URL is written
is searched for any piece of the passwords: runs.command and every other stored
column, the JSON lines and JUnit files of a run, ``export`` (json, junit, csv),
``builds``, ``summary``, the gate's outputs (its rerun run is stored too), the site,
``doctor``, ``db status``, the ``stored in ...`` line of ``torchconform run`` and the
one-line errors of an unreachable server.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from pg import pg_server  # noqa: F401  (fixture)
from torchconform.config import db_url, mask_password

PASSWORD = "S3cr/et?pw"        # the password: '/' and '?'
AT_PASSWORD = "S3cr@t/pw"      # an '@' too: SQLAlchemy alone ends the password at the first '@'
# Any of these in a text means (part of) a password got out; percent-encoded forms included.
LEAKS = ("S3cr", "et?pw", "et%3Fpw", "t/pw", "t%2Fpw")
MASKED = "tc:***@127.0.0.1"
TINY = '''import os


def test_steady():
    assert os.sep in ("/", "\\\\")


def test_flip():
    assert os.environ.get("TC_SECRET_FLIP") != "fail"
'''


def assert_no_secret(text: str, where: str) -> None:
    for leak in LEAKS:
        at = text.find(leak)
        assert at < 0, f"password in {where}: ...{text[max(0, at - 60):at + 40]!r}..."


def env_without_settings(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTEST_", "GITHUB_"))
           or k == "TORCHCONFORM_REFDEV_CACHE"}
    env.update(extra)
    return env


def tc(*args, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchconform", *map(str, args)], cwd=cwd,
                          env=env or env_without_settings(), capture_output=True, text=True, timeout=timeout)


def printed(proc) -> str:
    return proc.stdout + proc.stderr


# -- the masking rules themselves ---------------------------------------------------------
@pytest.mark.parametrize("text, shown", [
    ("postgresql+psycopg://tc:S3cr/et?pw@127.0.0.1:5432/tcf", "postgresql+psycopg://tc:***@127.0.0.1:5432/tcf"),
    ("postgresql+psycopg://tc:S3cr@t/pw@h/tcf", "postgresql+psycopg://tc:***@h/tcf"),
    ("postgresql+psycopg://tc:S3cr%2Fet%3Fpw@h/tcf", "postgresql+psycopg://tc:***@h/tcf"),
    ("pytest --tc-db 'postgresql+psycopg://tc:S3cr/et?pw@h:1/tcf' -q; user@example.org",
     "pytest --tc-db 'postgresql+psycopg://tc:***@h:1/tcf' -q; user@example.org"),
    ("postgresql+psycopg://tc@h/tcf?sslmode=require&password=S3cr/et?pw", "postgresql+psycopg://tc@h/tcf?sslmode=require&password=***"),
    ("host=h password='S3cr et' dbname=tcf", "host=h password=*** dbname=tcf"),
    ("PGPASSWORD=S3cr/et?pw psql", "PGPASSWORD=*** psql"),
    ("postgresql+psycopg://tc@h:5432/tcf", "postgresql+psycopg://tc@h:5432/tcf"),
    ("sqlite:////tmp/a:b@c/results.db", "sqlite:////tmp/a:b@c/results.db"),
])
def test_mask_password_hides_every_form(text, shown):
    assert mask_password(text) == shown


@pytest.mark.parametrize("password", [PASSWORD, AT_PASSWORD, "plain", "p#ss"])
def test_db_url_keeps_the_password_the_user_meant(password):
    url = db_url(f"postgresql+psycopg://tc:{password}@127.0.0.1:5432/tcf")
    parsed = make_url(url)
    assert (parsed.username, parsed.password, parsed.host, parsed.port, parsed.database) == \
        ("tc", password, "127.0.0.1", 5432, "tcf")
    assert db_url(url) == url


# -- a real server, real processes --------------------------------------------------------
@pytest.fixture(scope="module")
def urls(pg_server):  # noqa: F811
    """Roles tc (PASSWORD) and tc_at (AT_PASSWORD, member of tc) that must give their
    password, and their database tcf; the URLs a user would write for them."""
    import psycopg

    port = pg_server.port
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS tcf")
        conn.execute("DROP ROLE IF EXISTS tc_at")
        conn.execute("DROP ROLE IF EXISTS tc")
        conn.execute(f"CREATE ROLE tc LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE ROLE tc_at LOGIN PASSWORD '{AT_PASSWORD}' IN ROLE tc")
        conn.execute("CREATE DATABASE tcf OWNER tc")
        hba = Path(pg_server.dir) / "data" / "pg_hba.conf"
        hba.write_text("host all tc,tc_at 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 30
    while True:  # the reload is asynchronous: wait until a wrong password is refused
        try:
            psycopg.connect(host="127.0.0.1", port=port, user="tc", password="wrong", dbname="tcf").close()
        except psycopg.OperationalError as exc:
            assert "password authentication failed" in str(exc), exc
            break
        assert time.monotonic() < deadline, "pg_hba.conf reload did not take effect"
        time.sleep(0.2)
    return {"url": f"postgresql+psycopg://tc:{PASSWORD}@127.0.0.1:{port}/tcf",
            "at": f"postgresql+psycopg://tc_at:{AT_PASSWORD}@127.0.0.1:{port}/tcf",
            "query": f"postgresql+psycopg://tc@127.0.0.1:{port}/tcf?password={PASSWORD}",
            "refused": f"postgresql+psycopg://tc:{PASSWORD}@127.0.0.1:1/tcf",
            "port": port}


@pytest.fixture(scope="module")
def written(urls, tmp_path_factory):
    """Run every command that writes or prints a command or URL; {where: text}."""
    url, tmp = urls["url"], tmp_path_factory.mktemp("secrets")
    (tmp / "test_tiny.py").write_text(TINY)
    texts: dict[str, str] = {}
    procs: dict[str, subprocess.CompletedProcess] = {}

    def keep(name, proc, ok=(0,)):
        assert proc.returncode in ok, f"{name}: exit {proc.returncode}\n{printed(proc)[-3000:]}"
        procs[name] = proc
        texts[name] = printed(proc)

    # The runner: pytest in a child, JSON lines, JUnit, the store; its closing lines.
    keep("run", tc("run", "--device", "cpu", "--ops", "add", "-k", "test_compare_cpu_add and float32", "-n", "0",
                   "--build", "S1", "--db", url, "--junit", tmp / "run.xml", "--jsonl", tmp / "run.jsonl", cwd=tmp))
    # The plugin in a plain pytest run (two builds, the second with a regression for the gate).
    for build, flip in (("P1", "pass"), ("P2", "fail")):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "test_tiny.py", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
             "--tc-device", "cpu", "--tc-build", build, "--tc-db", url, "--tc-jsonl", str(tmp / f"{build}.jsonl"),
             "--tc-junit", str(tmp / f"{build}.xml")],
            cwd=tmp, env=env_without_settings(TC_SECRET_FLIP=flip), capture_output=True, text=True, timeout=600)
        keep(f"pytest {build}", proc, ok=(0, 1))
    keep("ingest", tc("ingest", tmp / "P1.xml", "--build", "I1", "--db", url, cwd=tmp))
    keep("gate", tc("gate", "--build", "P2", "--baseline", "P1", "--db", url, "--reruns", "1",
                    "--summary", tmp / "gate.md", "--junit", tmp / "gate.xml",
                    env=env_without_settings(TC_SECRET_FLIP="fail", GITHUB_STEP_SUMMARY=str(tmp / "step.md")),
                    cwd=tmp), ok=(1,))
    keep("gate --json", tc("gate", "--build", "P2", "--baseline", "P1", "--db", url, "--reruns", "0", "--json",
                           cwd=tmp), ok=(1,))
    for fmt in ("json", "junit", "csv"):
        keep(f"export {fmt}", tc("export", "--build", "P2", "--format", fmt, "--db", url, cwd=tmp))
        keep(f"export {fmt} --out", tc("export", "--build", "S1", "--format", fmt, "--db", url,
                                       "--out", tmp / f"export.{fmt}", cwd=tmp))
    keep("builds", tc("builds", "--db", url, cwd=tmp))
    keep("builds --json", tc("builds", "--json", "--db", url, cwd=tmp))
    keep("summary", tc("summary", "--build", "P2", "--db", url, cwd=tmp))
    keep("summary --json", tc("summary", "--build", "S1", "--json", "--db", url, cwd=tmp))
    keep("db status", tc("db", "status", "--db", url, cwd=tmp))
    keep("site", tc("site", "--db", url, "--out", tmp / "site", cwd=tmp))
    doctor_env = env_without_settings(TORCHCONFORM_DB=url)
    keep("doctor", tc("doctor", "--no-device", env=doctor_env, cwd=tmp), ok=(0, 1))
    keep("doctor --json", tc("doctor", "--no-device", "--json", env=doctor_env, cwd=tmp), ok=(0, 1))

    files = [p for p in tmp.rglob("*") if p.is_file()]
    for path in files:
        texts[str(path.relative_to(tmp))] = path.read_text(encoding="utf-8", errors="replace")

    import psycopg
    with psycopg.connect(host="127.0.0.1", port=urls["port"], user="postgres", dbname="tcf") as conn:
        for table in ("builds", "runs", "tests", "results"):
            texts[f"table {table}"] = repr(conn.execute(f"SELECT * FROM {table}").fetchall())
        commands = [row[0] for row in conn.execute("SELECT command FROM runs ORDER BY id")]
    return {"texts": texts, "procs": procs, "commands": commands, "files": files, "tmp": tmp}


@pytest.mark.postgres
def test_no_password_in_any_stored_or_printed_text(written):
    texts = written["texts"]
    # Everything the brief names was really written.
    for name in ("run.jsonl", "run.xml", "P1.jsonl", "P2.xml", "gate.md", "gate.xml", "step.md",
                 "export.json", "export.junit", "export.csv", "site/index.html"):
        assert name in texts, name
    assert any(name.startswith("site/builds/") for name in texts)
    for where, text in texts.items():
        assert_no_secret(text, where)


@pytest.mark.postgres
def test_commands_and_urls_are_kept_masked(written):
    texts, commands = written["texts"], written["commands"]
    # runs.command: the runner's pytest, the two plain pytest runs, ingest, the gate's rerun run.
    assert sum("--tc-db" in c and MASKED in c for c in commands) == 3, commands
    assert any(c.startswith("torchconform ingest") and MASKED in c for c in commands), commands
    assert any("gate" in c and MASKED in c for c in commands), commands
    for name in ("run.jsonl", "P1.jsonl"):
        run = json.loads(texts[name].splitlines()[0])["run"]
        assert MASKED in run["command_line"], run["command_line"]
    exported = json.loads(texts["export json"])
    assert any(MASKED in r["command"] for r in exported["build"]["runs"])
    assert f"stored in postgresql+psycopg://{MASKED}" in written["procs"]["run"].stdout
    for name in ("doctor", "db status"):
        assert MASKED in texts[name], texts[name]
    assert MASKED in json.loads(written["procs"]["doctor --json"].stdout)["database"]


@pytest.mark.postgres
@pytest.mark.parametrize("command", [["builds"], ["summary", "--build", "S1"], ["db", "status"]])
def test_unreachable_server_is_one_masked_line(urls, tmp_path, command):
    proc = tc(*command, "--db", urls["refused"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("torchconform: error: cannot open database ")
    assert "tc:***@127.0.0.1:1/tcf" in line and "refused" in line.lower(), line
    assert_no_secret(line, "error line")


@pytest.mark.postgres
def test_runner_with_unreachable_server_fails_with_a_masked_line(urls, tmp_path):
    proc = tc("run", "--device", "cpu", "--ops", "add", "-n", "0", "--db", urls["refused"], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("torchconform: error: ") and "tc:***@127.0.0.1:1/tcf" in last, last
    assert_no_secret(printed(proc), "run with an unreachable server")


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["at", "query"])
def test_password_with_at_sign_or_as_query_parameter_connects(urls, tmp_path, written, kind):
    """tc_at's password holds '@' (last '@' rule); tc's given as ?password=.  Both must
    really log in (scram) and still never be printed."""
    proc = tc("builds", "--json", "--db", urls[kind], cwd=tmp_path)
    assert proc.returncode == 0, printed(proc)
    assert {"S1", "P1", "P2", "I1"} <= {b["name"] for b in json.loads(proc.stdout)}
    status = tc("db", "status", "--db", urls[kind], cwd=tmp_path)
    assert status.returncode == 0, printed(status)
    for p in (proc, status):
        assert_no_secret(printed(p), f"{kind} URL")
