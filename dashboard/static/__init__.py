"""Not code: a package only so that setuptools ships the static files in wheels (see setup.py)."""
