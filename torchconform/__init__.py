"""torchconform: conformance and CI test suites for PyTorch device backends.

One import namespace over the repository's components:

- ``torchconform.refdev``      the reference PrivateUse1 device (host memory)
- ``torchconform.suites``      what runs: OpInfo ops, ModuleInfo modules, upstream files, model zoo
- ``torchconform.collectors``  the pytest plugin and the one classifier of outcomes
- ``torchconform.skiplists``   backend profiles and known-issue lists, as data
- ``torchconform.db``          the results store (SQLite or PostgreSQL) and its queries
- ``torchconform.ci``          the per-build gate and CI templates
- ``torchconform.dashboard``   the static coverage site
- ``torchconform.cli``         the ``torchconform`` console script
"""
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("torchconform")
except _metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+source"
