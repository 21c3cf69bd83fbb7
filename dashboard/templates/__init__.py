"""Not code: a package only so that setuptools ships the templates files in wheels (see setup.py)."""
