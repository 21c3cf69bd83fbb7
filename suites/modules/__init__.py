"""The ModuleInfo suite: PyTorch's ``module_db`` (from the wheel) on the device,
forward and backward compared with CPU, per dtype (see ``test_modules.py``)."""
from __future__ import annotations

import os
from torchconform.errors import UserError

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_FILE = os.path.join(HERE, "test_modules.py")
# ``torchconform run --suite modules`` runs these (selection and --ops reach the
# file through the plugin's --tc-selection / --tc-ops).
TEST_PATHS = [TEST_FILE]


def suite_args() -> list[str]:
    return [TEST_FILE]


def pytest_args(selection: str | None = None, modules=None) -> list[str]:
    """pytest arguments for the suite (add the runner's ``--tc-*`` options).

    The selection and the module filter travel as ``--tc-selection`` / ``--tc-ops``,
    which the plugin exports to the environment before the file is imported.
    """
    args = [TEST_FILE]
    if selection:
        if selection not in ("quick", "full"):
            raise UserError(f"unknown modules selection {selection!r}; use quick or full")
        args += ["--tc-selection", selection]
    if modules:
        args += ["--tc-ops", modules if isinstance(modules, str) else ",".join(modules)]
    return args
