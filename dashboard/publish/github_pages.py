"""Make a generated site ready for GitHub Pages (e.g. actions/upload-pages-artifact).

GitHub Pages runs Jekyll by default, which hides files and folders starting with
``_`` or ``.`` and slows deploys; an empty ``.nojekyll`` turns that off.  With a
custom domain, Pages also wants a ``CNAME`` file.
"""
from __future__ import annotations

from pathlib import Path

from torchconform.errors import UserError


def publish(site_dir, cname: str | None = None) -> Path:
    site_dir = Path(site_dir)
    if not (site_dir / "index.html").is_file():
        raise UserError(f"{site_dir} holds no generated site (no index.html); run `torchconform site --out {site_dir}` first")
    (site_dir / ".nojekyll").write_text("")
    if cname:
        (site_dir / "CNAME").write_text(cname.strip() + "\n")
    return site_dir
