"""torchconform: conformance and CI test suites for PyTorch device backends.

One import namespace over the repository's component folders: setup.py's ``COMPONENTS``
is the one list (it maps each folder under ``torchconform``); docs/architecture.md says
what each holds and which may import which.  This package itself is the ground floor.
"""
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("torchconform")
except _metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+source"
