"""The static HTML coverage site (``torchconform site``).

Datasette-like small pieces: ``templates/`` and ``static/`` beside the code,
``render.py`` (jinja2, autoescape on), ``charts.py`` (inline SVG), one module per
page kind under ``pages/``, one module per publishing target under ``publish/``.
"""


def build_site(store, out_dir, base_url=None, **kwargs):
    """Generate the site; see ``torchconform.dashboard.site.build_site``."""
    # the package itself stays light: the site's modules (jinja2, numpy) load when a site is built
    from torchconform.dashboard.site import build_site as _build_site

    return _build_site(store, out_dir, base_url, **kwargs)
