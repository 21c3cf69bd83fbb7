"""Faults: a site generation killed half-way (issue 34, item 4).

Before the fix ``torchconform site --out DIR`` rewrote DIR in place, so a SIGKILL a
second in left an old home page, ``tables/`` deleted, a new build's page linking pages
not yet written and a JS data file cut off.  Now the site is written into a staging
folder beside DIR (the previous site hard-linked in, for the reuse of unchanged builds)
and swapped in whole.  Here a real ``torchconform site`` process is killed with SIGKILL
while its staging folder is being written: DIR is byte for byte the old site, every link
in it resolves; the next run removes the dead run's staging folder and publishes a whole
site with the new build.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
from gen_outcomes import write_builds  # noqa: E402

import test_site_links as links  # noqa: E402  (the site's link crawler)

from torchconform.dashboard import build_site, staging  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.safe import safe_file_name  # noqa: E402

OUTCOMES = 20_000     # per build: a generation of the new build takes a few seconds
REPO = Path(__file__).resolve().parent.parent


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def _site(db: Path, out: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTEST_"))}
    env["TORCHCONFORM_SITE_WORKERS"] = "1"   # one process to kill: no orphaned renderers
    return subprocess.Popen([sys.executable, "-m", "torchconform", "site", "--db", str(db), "--out", str(out)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_while_staging(proc: subprocess.Popen, out: Path, new_slug: str, timeout: float = 240) -> Path:
    """SIGKILL ``proc`` once its staging folder holds the new build's folder (pages being
    written); returns that staging folder."""
    stage = out.parent / f"{staging.staging_prefix(out)}{proc.pid}"
    deadline = time.monotonic() + timeout
    while not (stage / "builds" / new_slug).is_dir():
        assert proc.poll() is None, f"generation ended before it could be killed: {proc.communicate()}"
        assert time.monotonic() < deadline, "no staging folder appeared"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return stage


def test_a_site_generation_killed_half_way_leaves_the_old_site_whole(tmp_path):
    db, out = tmp_path / "store.db", tmp_path / "site"
    with open_store(str(db)) as store:
        names = write_builds(store, 3, OUTCOMES, prefix="night")
    first = _site(db, out)
    assert first.wait(timeout=600) == 0, first.communicate()
    old = _tree(out)
    assert "index.html" in old and any(k.startswith("tables/") for k in old)
    assert links.crawl(out) == []

    with open_store(str(db)) as store:
        new = write_builds(store, 1, OUTCOMES, prefix="night", start=3)[0]
    new_slug = safe_file_name(new)
    killed = _site(db, out)
    stage = _kill_while_staging(killed, out, new_slug)
    assert killed.returncode == -signal.SIGKILL
    assert stage.is_dir()                        # what the killed run left: beside the site, not in it
    assert _tree(out) == old                     # the old site, byte for byte (shared files untouched too)
    assert links.crawl(out) == []
    assert not (out / "builds" / new_slug).exists()

    # the next run removes the dead run's staging folder and publishes the whole new site
    again = _site(db, out)
    assert again.wait(timeout=600) == 0, again.communicate()
    assert not stage.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(staging.staging_prefix(out))]
    assert (out / "builds" / new_slug / "index.html").is_file()
    assert f'builds/{new_slug}/index.html' in (out / "index.html").read_text(encoding="utf-8")
    assert all(f'builds/{safe_file_name(n)}/index.html' in (out / "index.html").read_text(encoding="utf-8")
               for n in names)
    assert links.crawl(out) == []


def test_a_failed_generation_leaves_the_old_site_and_no_staging_folder(tmp_path, monkeypatch):
    """An error half-way (here: the home page cannot be rendered) is the same as a kill for
    the published folder, and its staging folder is removed at once."""
    db, out = tmp_path / "store.db", tmp_path / "site"
    with open_store(str(db)) as store:
        write_builds(store, 2, 2_000, prefix="small")
        build_site(store, out)
        old = _tree(out)
        write_builds(store, 1, 2_000, prefix="small", start=2)
        from torchconform.dashboard.pages import home

        def broken(*args, **kwargs):
            raise RuntimeError("home page failed")
        monkeypatch.setattr(home, "render", broken)
        with pytest.raises(RuntimeError, match="home page failed"):
            build_site(store, out)
    assert _tree(out) == old
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(staging.staging_prefix(out))]


def test_unchanged_pages_are_shared_not_copied_and_a_rewrite_never_touches_the_old_file(tmp_path):
    """The staging folder starts as hard links to the live site; a page written there is a
    new file, so a generation never changes a file the live site serves."""
    live, stage = tmp_path / "site", tmp_path / ".site.staging-1"
    (live / "builds" / "b").mkdir(parents=True)
    (live / "index.html").write_text("old home")
    (live / "builds" / "b" / "index.html").write_text("kept page")
    stage.mkdir()
    staging.link_tree(live, stage)
    assert os.path.samefile(live / "builds" / "b" / "index.html", stage / "builds" / "b" / "index.html")
    staging.write_text(stage / "index.html", "new home")
    assert (live / "index.html").read_text() == "old home"
    staging.swap_in(stage, live)
    assert (live / "index.html").read_text() == "new home"
    assert (live / "builds" / "b" / "index.html").read_text() == "kept page"
    assert not stage.exists()
