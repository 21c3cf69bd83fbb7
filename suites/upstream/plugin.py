"""pytest plugin for upstream PyTorch test files: PyTorch's own out-of-tree hooks.

Runs after the device is set up (the runner does that before conftests load) and
before any test file is imported, and configures the device's test base class in
``torch.testing._internal.common_device_type`` where the installed torch offers it:

* ``op_overrides``: skiplist ``op`` entries in mode ``skip`` become ``DecorateInfo``
  skips on the OpInfos, the same mechanism as OpInfo's own skips, so they apply
  inside every ``@ops`` test of every upstream file exactly as PyTorch would;
  the skip reason carries the entry, so the outcome is ``skip_backend/skiplist``;
* ``op_allowlist``, ``test_exclusions``, ``bypass_device_restrictions``: from
  ``files.yaml`` (``privateuse1:`` section).

It also wraps ``TestCase.assertEqual`` so that each comparison records its tolerance tier
(suites/upstream/tiers.py), and fixes the PrivateUse1 base's ``device_type`` to the backend name before
instantiation, so every generated class is ``Test...<DEVICE>`` (otherwise the
first file's classes are named ``...PRIVATEUSE1`` and the rest ``...<DEVICE>``).
"""
from __future__ import annotations

import re
import unittest

import pytest

from torchconform.suites.upstream import load_config, tiers
from torchconform.collectors import skiplist_plugin as sp
from torchconform.collectors.session import is_xdist_controller, option
from torchconform.collectors.skiplist_plugin import run_mode
from torchconform.skiplists.entries import TestInfo
from torchconform.suites.upstream import checkout_branch, checkout_commit

_GLOB = re.compile(r"[*?\[]")
DELEGATED_KEY = pytest.StashKey[set]()


def _device(config) -> str:
    return option(config, "tc_device") or ""


def _device_base(cdt, device: str):
    """The DeviceTypeTestBase subclass that instantiates tests for ``device``."""
    import torch

    pu1 = torch._C._get_privateuse1_backend_name()
    for base in cdt.device_type_test_bases:
        dt = getattr(base, "device_type", "")
        if dt == device or (dt == "privateuse1" and device == pu1 and device != "privateuse1"):
            return base
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_torchconform_run_start(config, run):
    """Record which PyTorch source ran, beside the build's own ``branch``/``commit``
    (those name the checkout the run was started from: the backend's CI checkout,
    what series and baselines follow)."""
    src = str(config.rootpath)
    run.update(pytorch_src=src, pytorch_branch=checkout_branch(src), pytorch_commit=checkout_commit(src) or "")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    device = _device(config)
    if not device:
        return

    if is_xdist_controller(config):
        return  # tests are instantiated (and these hooks needed) on the workers only
    import torch.testing._internal.common_device_type as cdt

    _set_run_tests_globals()
    tiers.install()   # assertEqual records tolerance tiers (suites/upstream/tiers.py)
    base = _device_base(cdt, device)
    if base is None:
        return
    if base.__name__ == "PrivateUse1TestBase" and base.device_type == "privateuse1":
        base.setUpClass()
    settings = (load_config().get("privateuse1") or {})
    overrides, delegated = op_overrides_from_skiplist(config)
    if hasattr(base, "set_test_configs"):
        base.set_test_configs(op_overrides=overrides or None, op_allowlist=settings.get("op_allowlist"),
                              test_exclusions=settings.get("test_exclusions") or None)
    else:
        # Older torch without the hooks: skiplist entries still apply at collection.
        delegated = set()
    if hasattr(base, "bypass_device_restrictions"):
        base.bypass_device_restrictions = bool(settings.get("bypass_device_restrictions", False))
    config.stash[DELEGATED_KEY] = delegated
    matcher = _matcher(config)
    if matcher is not None:
        matcher.delegated = set(delegated)


def _set_run_tests_globals() -> None:
    """What ``common_utils.run_tests()`` (``parse_cmd_line_args``) sets before an upstream file's
    tests run when the file is its own main program; under pytest nobody calls it, and
    ``JitTestCase`` then fails every test with "GRAPH_EXECUTOR must be set".  Only the value
    parse_cmd_line_args infers without a ``--jit-executor`` flag (it parses sys.argv, which is
    pytest's here, so it is not called itself)."""
    from torch.testing._internal import common_utils

    if getattr(common_utils, "GRAPH_EXECUTOR", "absent") is None and hasattr(
            common_utils, "cppProfilingFlagsToProfilingMode"):
        common_utils.GRAPH_EXECUTOR = common_utils.cppProfilingFlagsToProfilingMode()


def _matcher(config):
    return config.stash.get(sp._MATCHER_KEY, None)


def op_overrides_from_skiplist(config) -> tuple[dict, set]:
    """``{OpInfo full name: [DecorateInfo skip]}`` and the refs of the entries handed to PyTorch."""
    matcher = _matcher(config)
    if matcher is None:
        return {}, set()

    entries = [e for e in matcher.entries
               if e.op is not None and run_mode(e, matcher.audit) == "skip" and e.active()
               and not (e.kind and _GLOB.search(e.kind))]
    if not entries:
        return {}, set()
    return build_op_overrides(entries)


def build_op_overrides(entries) -> tuple[dict, set]:
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo.core import DecorateInfo

    overrides: dict[str, list] = {}
    used: set[str] = set()
    for entry in entries:
        dtypes = tuple(getattr(torch, d) for d in entry.dtypes) or None
        for op in op_db:
            probe = TestInfo(test_id="", op=op.name, op_variant=op.variant_test_name or "")
            plain = type(entry)(**{**entry.__dict__, "dtypes": (), "kind": None, "_compiled": None})
            if not plain.matches(probe):
                continue
            overrides.setdefault(op.full_name, []).append(
                DecorateInfo(unittest.skip(entry.skip_reason()), cls_name=None, test_name=entry.kind,
                             dtypes=dtypes))
            used.add(entry.ref)
    return overrides, used
