"""One module per page kind; each exposes ``render(site, ...)`` and writes its pages and downloads."""
