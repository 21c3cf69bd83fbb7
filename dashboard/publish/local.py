"""Copy a generated site into a folder served by any static web server (or opened via file://).

The copy is staged next to the destination and swapped in with renames, so a
web server never serves a half-copied site.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from torchconform.errors import UserError


def publish(site_dir, dest) -> Path:
    site_dir, dest = Path(site_dir), Path(dest)
    if not (site_dir / "index.html").is_file():
        raise UserError(f"{site_dir} holds no generated site (no index.html); run `torchconform site --out {site_dir}` first")
    if dest.resolve() == site_dir.resolve():
        return dest
    if dest.exists() and any(dest.iterdir()) and not (dest / "index.html").exists():
        raise UserError(f"{dest} is not empty and holds no site; pass an empty folder or a previous publish target")
    staging = dest.with_name(dest.name + ".staging")
    old = dest.with_name(dest.name + ".old")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(site_dir, staging)
    if dest.exists():
        shutil.rmtree(old, ignore_errors=True)
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest
