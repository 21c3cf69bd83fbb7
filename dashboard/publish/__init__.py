"""Publishing targets for a generated site, one module per target (like Datasette's ``publish/``).

Each module exposes ``publish(site_dir, **options) -> Path`` and returns where the site now lives.
"""
TARGETS = ("local", "github_pages")
