"""The shipped refdev skiplist: lints clean, covers the quick run's known failures,
and an injected stale entry is caught by ``lint --collect`` and ``propose --prune``.

Restricted to ``nn.functional.cross_entropy`` (whose float64 result, computed as
float32 by young-backend, is the quick run's known failure) so that it takes
seconds, not the quick run's minutes.
"""
import os
import shutil
import subprocess
import sys

import pytest
from support import child_env

from torchconform.db import read_rows
from torchconform.db.opening import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = os.path.join(ROOT, "skiplists", "refdev", "young-backend.yaml")
OP = "nn.functional.cross_entropy"

STALE = """\
  - id: cross-entropy-int64-gone
    match: {op: nn.functional.cross_entropy, dtype: int64}
    mode: skip
    category: known_bug
    reason: integer cross_entropy crashed once; cross_entropy has no integer tests at all
    issue: https://github.com/torchconform/refdev/issues/99
    added: 2026-11-30
  - id: cross-entropy-f32-fixed
    match: {op: nn.functional.cross_entropy, dtype: float32, kind: test_compare_cpu}
    mode: xfail
    category: known_bug
    reason: float32 cross_entropy was off; it has matched CPU since the fix
    issue: https://github.com/torchconform/refdev/issues/98
    added: 2026-11-30
"""


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
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "torchconform.collectors.skiplist_plugin",
         "suites/ops/test_ops.py", "--tc-device", "refdev", "--tc-ops", OP, "--tc-skiplist", injected,
         "--tc-db", db, "--tc-build", "ln"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=child_env())
    # pytest itself reports the gradient test's missing operator as a failure (exit 1);
    # torchconform classifies it as skip_backend/missing_op, checked below.
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    store = open_store(db)
    try:
        got = {(o.variant, o.dtype): o for o in read_rows.iter_outcomes(store, "ln")}
    finally:
        store.close()
    o = got[("compare_cpu", "float64")]
    assert (o.outcome, o.kind) == ("skip_backend", "skiplist"), (o.outcome, o.message)
    assert o.skiplist_entry == "refdev/young-backend.yaml::cross-entropy-f64-as-f32"
    assert got[("compare_cpu", "float32")].outcome == "xpass"
    assert not [o for o in got.values() if o.outcome in ("fail", "error", "crash", "timeout")]
    grad = got[("compare_cpu_grad", "float32")]
    assert (grad.outcome, grad.kind, grad.missing_op) == ("skip_backend", "missing_op", "aten::nll_loss_backward.grad_input")

    out = cli("skiplist", "propose", "--build", "ln", "--db", db, "--skiplist", injected, "--prune")
    assert out.returncode == 0, out.stderr
    removals = out.stdout.split("remove:", 1)[1]
    assert "id: cross-entropy-int64-gone" in removals and "id: cross-entropy-f32-fixed" in removals
    assert "cross-entropy-f64-as-f32" not in removals   # shipped skips were not run: nothing to say about them


def test_lint_collect_finds_the_injected_stale_entry(injected):
    proc = cli("skiplist", "lint", injected, "--collect", f"suites/ops/test_ops.py --tc-device refdev --tc-ops {OP}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    stale = [ln for ln in proc.stdout.splitlines() if "[stale]" in ln]
    assert len(stale) == 1 and "entry cross-entropy-int64-gone" in stale[0]
    assert not [ln for ln in proc.stdout.splitlines() if "error" in ln and "[stale]" not in ln]
