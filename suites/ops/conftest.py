"""The ops suite's collection rule (loaded after the plugin set the device up).

The device-memory leak check is not here: it applies to every pytest run on a
device, so it is the plugin's (collectors/devicecheck.py, called by collectors/worker.py).
"""
from pathlib import Path

from torchconform import settings
from torchconform.suites.ops.selection import keep_test

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """The selection's per-op dtype rule (complex64 only for a few ops in quick), for
    this suite's tests only: the hook sees every item of the session, and other
    suites run in the same session keep their own complex64 tests."""
    device_type = settings.get("TORCHCONFORM_DEVICE")
    kept, dropped = [], []
    for item in items:
        ours = Path(item.path).resolve().is_relative_to(HERE)
        (kept if not ours or keep_test(item.name, device_type) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept

