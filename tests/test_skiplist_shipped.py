"""The shipped refdev skiplist: lints clean, covers the quick run's known failures,
and an injected stale entry is caught by ``lint --collect`` and ``propose --prune``.

Restricted to ``nn.functional.layer_norm`` (the op whose float32 results are the
quick run's known failures) so that it takes seconds, not the quick run's minutes.
"""
import os
import shutil
import subprocess
import sys

import pytest

from torchconform.db import queries
from torchconform.db.store import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = os.path.join(ROOT, "skiplists", "refdev", "young-backend.yaml")
OP = "nn.functional.layer_norm"

STALE = """\
  - id: layer-norm-int64-gone
    match: {op: nn.functional.layer_norm, dtype: int64}
    mode: skip
    category: known_bug
    reason: integer layer_norm crashed once; layer_norm has no integer tests at all
    issue: https://github.com/torchconform/refdev/issues/99
    added: 2026-11-30
  - id: layer-norm-f64-fixed
    match: {op: nn.functional.layer_norm, dtype: float64, kind: test_compare_cpu}
    mode: xfail
    category: known_bug
    reason: float64 layer_norm was off; it has matched CPU since the fix
    issue: https://github.com/torchconform/refdev/issues/98
    added: 2026-11-30
"""


def child_env(**extra):
    """Environment for a child pytest: without the xdist worker variables of this
    run (the child would take itself for a worker and record nothing)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT_TEST"))}
    env.update(extra)
    return env


def cli(*args):
    return subprocess.run([sys.executable, "-m", "torchconform.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=child_env())


def test_shipped_skiplist_lints_clean():
    proc = cli("skiplist", "lint", os.path.join(ROOT, "skiplists", "refdev"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "" and "0 error(s), 0 warning(s)" in proc.stderr


@pytest.fixture(scope="module")
def injected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shipped")
    # Keep the file under a skiplists/refdev folder so entry refs read as shipped ones do.
    folder = tmp / "skiplists" / "refdev"
    folder.mkdir(parents=True)
    path = folder / "young-backend.yaml"
    shutil.copy(SHIPPED, path)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(STALE)
    return str(path)


def test_known_failures_become_skiplist_skips_and_stale_entries_are_pruned(injected, tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "torchconform.skiplists.plugin",
         "suites/ops/test_ops.py", "--tc-device", "refdev", "--tc-ops", OP, "--tc-skiplist", injected,
         "--tc-db", db, "--tc-build", "ln"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=child_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    store = open_store(db)
    try:
        got = {(o.variant, o.dtype): o for o in queries.iter_outcomes(store, "ln")}
    finally:
        store.close()
    for variant in ("compare_cpu", "compare_cpu_grad", "noncontiguous_samples"):
        o = got[(variant, "float32")]
        assert (o.outcome, o.kind) == ("skip_backend", "skiplist"), (variant, o.outcome, o.message)
        assert o.skiplist_entry.startswith("refdev/young-backend.yaml::layer-norm-f32-")
    assert got[("compare_cpu", "float64")].outcome == "xpass"
    assert not [o for o in got.values() if o.outcome in ("fail", "error", "crash", "timeout")]

    out = cli("skiplist", "propose", "--build", "ln", "--db", db, "--skiplist", injected, "--prune")
    assert out.returncode == 0, out.stderr
    removals = out.stdout.split("remove:", 1)[1]
    assert "id: layer-norm-int64-gone" in removals and "id: layer-norm-f64-fixed" in removals
    assert "layer-norm-f32" not in removals      # shipped skips were not run: nothing to say about them


def test_lint_collect_finds_the_injected_stale_entry(injected):
    proc = cli("skiplist", "lint", injected, "--collect", f"suites/ops/test_ops.py --tc-device refdev --tc-ops {OP}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    stale = [ln for ln in proc.stdout.splitlines() if "[stale]" in ln]
    assert len(stale) == 1 and "entry layer-norm-int64-gone" in stale[0]
    assert not [ln for ln in proc.stdout.splitlines() if "error" in ln and "[stale]" not in ln]
