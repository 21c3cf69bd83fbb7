"""Write the site beside its folder and swap it in: a generation killed half-way leaves the
old site whole, and a web server never serves a half-written one.

``staged(out)`` gives the folder to generate into: ``.<name>.staging-<pid>`` beside ``out``,
which starts as the previous site made of hard links (what the reuse of unchanged builds
reads and keeps, at the cost of a link per file instead of a copy of every byte).  The
site's writers never write into an existing file (``write_text`` replaces it), so no file
shared with the live site changes.  Once the site is complete the two folders trade places
in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames) and the old site,
now in the staging folder, is removed.  A generation killed before the swap leaves only its
staging folder, which the next run removes (its process is gone).

Where the staging folder cannot be made beside ``out`` (its parent is not writable, or ``out``
is a mount point, so hard links cannot cross), the site is written in place as before.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
from pathlib import Path
from typing import Iterator

STAGING = ".{name}.staging-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def write_text(path: Path, text: str) -> None:
    """Write ``path`` as a new file, never into the existing one: in a staging folder that
    file is a hard link shared with the live site."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    path.write_text(text, encoding="utf-8")


def staging_prefix(out: Path) -> str:
    return STAGING.format(name=out.name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(out: Path) -> None:
    """Remove the staging folders of generations of ``out`` that were killed (process gone)."""
    prefix = staging_prefix(out)
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(prefix):].removesuffix("-old")
        if entry.name.startswith(prefix) and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)


def link_tree(src: Path, dst: Path) -> None:
    """``dst`` (an existing empty folder) made the same tree as ``src``, each file a hard link."""
    for entry in os.scandir(src):
        target = os.path.join(dst, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            os.mkdir(target)
            link_tree(Path(entry.path), Path(target))
        else:
            os.link(entry.path, target)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step; False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def swap_in(stage: Path, out: Path) -> None:
    """Make ``stage`` the folder ``out``; what ``out`` held is removed."""
    if not out.exists():
        stage.rename(out)
        return
    if not _exchange(stage, out):
        # Two renames: for a moment there is no ``out`` (never a half-written one).
        old = stage.with_name(stage.name + "-old")
        out.rename(old)
        stage.rename(out)
        stage = old
    shutil.rmtree(stage, ignore_errors=True)


def _prepared(out: Path, stage: Path) -> bool:
    """Make ``stage`` the previous site in hard links; False where no staging is possible."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage.mkdir()
        if out.is_dir():
            link_tree(out, stage)
        return True
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.EXDEV, errno.EMLINK):
            return False
        raise


@contextlib.contextmanager
def staged(out_dir) -> Iterator[Path]:
    """The folder to generate the site of ``out_dir`` into; swapped in when the block ends
    without an error, removed when it raises (the old site is left as it was)."""
    out = Path(os.path.realpath(out_dir))   # a link to the site folder stays a link
    remove_stale(out)
    stage = out.parent / f"{staging_prefix(out)}{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    if not _prepared(out, stage):
        yield out   # in place, as before
        return
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    swap_in(stage, out)
