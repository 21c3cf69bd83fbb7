"""The ops suite's sample inputs: where they are made, and their CPU copies.

Two rules keep the comparison with CPU honest:

* The CPU copy of a sample is on CPU entirely: its tensors, and every argument that
  names the device (``device=`` of ``arange``, ``full``, ``*_like``, the device
  argument of ``to``), renamed ``cpu``. Otherwise a factory operator's "CPU
  reference" would run on the device and be compared with itself, and its failure
  there would be filed as a sample CPU cannot compute (:func:`cpu_copy`,
  :func:`check_reference_on_cpu`).
* A missing operator that stops the samples from being made (``uniform_``,
  ``random_``, ``normal_`` fill most of them) is still ``skip_backend/missing_op``
  naming that operator, but its message starts with ``sample creation:`` so a
  reader sees it is not the operator under test (:func:`device_samples`).

``TORCHCONFORM_SAMPLES_ON`` (``--tc-samples-on``) says where samples are made:
``device`` (the default, as upstream PyTorch does) or ``cpu``: made on CPU and
copied to the device (every ``cpu`` device argument renamed to the device), so
a backend lacking the random-number operators still measures the operator under
test. See docs/classification.md, "Where the ops suite makes its samples".
"""
from __future__ import annotations

import contextlib
import re
import unittest

import torch
from torch.testing._internal.opinfo.core import SampleInput

from torchconform import settings
from torchconform.errors import UserError
from torchconform.core.classify import classify_exception, exception_chain
from torchconform.core.outcome import MISSING_OP, SKIP_BACKEND
from torchconform.suites.common import active_profile

SAMPLES_ON_ENV = "TORCHCONFORM_SAMPLES_ON"
SAMPLES_ON_CHOICES = ("device", "cpu")
SAMPLE_CREATION_PREFIX = "sample creation:"


def samples_on() -> str:
    """Where the samples are made: ``device`` (default) or ``cpu``."""
    value = settings.get(SAMPLES_ON_ENV).strip().lower()
    if value not in SAMPLES_ON_CHOICES:
        raise UserError(f"{SAMPLES_ON_ENV}={value!r} is not a place to make samples; use device (the default) or cpu")
    return value


def names_device(value, device_type: str) -> bool:
    """Whether ``value`` (a ``torch.device`` or a string) names a device of ``device_type``."""
    if isinstance(value, torch.device):
        return value.type == device_type
    return isinstance(value, str) and re.fullmatch(rf"{re.escape(device_type)}(:\d+)?", value) is not None


def _renamed(value, target: str):
    return torch.device(target) if isinstance(value, torch.device) else target


def _tensor_to(t: torch.Tensor, target: str, leaf: bool) -> torch.Tensor:
    # copy=True: a CPU sample's CPU copy must not share memory with it (in-place ops)
    y = t.detach().to(target, copy=True)
    if leaf and t.requires_grad and (y.is_floating_point() or y.is_complex()):
        y.requires_grad_(True)
    return y


def _moved_value(value, target: str, from_type: str, leaf: bool):
    if isinstance(value, torch.Tensor):
        # a tensor elsewhere (a CPU scalar tensor in a device sample) stays where it is, as a copy
        return _tensor_to(value, target if value.device.type == from_type else value.device, leaf)
    if names_device(value, from_type):
        return _renamed(value, target)
    if isinstance(value, torch.Size):
        return value
    if isinstance(value, list):
        return [_moved_value(v, target, from_type, leaf) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_moved_value(v, target, from_type, leaf) for v in value)
    if isinstance(value, dict):
        return {k: _moved_value(v, target, from_type, leaf) for k, v in value.items()}
    return value


def moved(sample: SampleInput, target: str, from_type: str, *, leaf: bool = False) -> SampleInput:
    """A copy of ``sample`` with its tensors of device type ``from_type`` copied to
    ``target``, and every argument naming a ``from_type`` device renamed ``target``.
    ``leaf``: copies of tensors that require grad are fresh autograd leaves."""
    with torch.no_grad():
        return SampleInput(
            _moved_value(sample.input, target, from_type, leaf),
            args=_moved_value(sample.args, target, from_type, leaf),
            kwargs=_moved_value(sample.kwargs, target, from_type, leaf),
            output_process_fn_grad=sample.output_process_fn_grad,
            broadcasts_input=sample.broadcasts_input,
            name=sample.name,
        )


def cpu_copy(sample: SampleInput, device: str, *, leaf: bool = False) -> SampleInput:
    """The sample the CPU reference runs on: nothing in it on, or naming, ``device``."""
    return moved(sample, "cpu", torch.device(device).type, leaf=leaf)


def tensors_in(x):
    """Every tensor in a (nested) list, tuple or dict, depth first."""
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from tensors_in(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from tensors_in(v)


def check_reference_on_cpu(result, op_name: str) -> None:
    """A CPU reference with a tensor elsewhere ran (in part) on the device: comparing it
    with the device's result would compare the device with itself. A suite bug, said loudly."""
    for t in tensors_in(result):
        if t.device.type != "cpu":
            raise AssertionError(f"the CPU reference of {op_name} returned a tensor on {t.device}: an argument "
                                 "still names the device (samples.cpu_copy must rename it)")


def device_failure_verdict(exc: BaseException):
    """The classifier's verdict when ``exc`` is the device's doing (a missing operator,
    collective, dtype...: any backend skip), else None."""
    verdict = classify_exception(exc, active_profile())
    return verdict if verdict.outcome == SKIP_BACKEND else None


def _creation_blocked(exc: Exception) -> unittest.SkipTest | None:
    """A skip saying a missing operator blocked making the samples, or None when
    ``exc`` is not a missing operator."""
    verdict = device_failure_verdict(exc)
    if verdict is None or verdict.kind != MISSING_OP:
        return None

    profile = active_profile()
    # the dispatcher's own line (root cause first), so the skip reads "sample creation: Could not run 'aten::X' ..."
    for e in reversed(exception_chain(exc)):
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        if lines and verdict.missing_op in profile.find_missing_ops(lines[0]):
            said = lines[0].strip().split(". ")[0].rstrip(".")  # the dispatcher's first sentence names it all
            return unittest.SkipTest(f"{SAMPLE_CREATION_PREFIX} {said} (while making the sample inputs, before the "
                                     f"operator under test ran; --tc-samples-on cpu makes them on CPU)")
    return unittest.SkipTest(f"{SAMPLE_CREATION_PREFIX} {verdict.message}")


def _named_creation(samples):
    """``samples`` as they are made; a missing operator while making one is a skip
    that says so (the operator under test has not run yet)."""
    it = iter(samples)
    while True:
        with _creation_skips():
            try:
                sample = next(it)
            except StopIteration:
                return
        yield sample


@contextlib.contextmanager
def _creation_skips():
    """Inside: a missing operator while making a sample is raised as the skip that says so."""
    try:
        yield
    except unittest.SkipTest:
        raise
    except Exception as exc:
        blocked = _creation_blocked(exc)
        if blocked is None:
            raise
        raise blocked from None


def device_samples(op, device: str, dtype, requires_grad: bool = False):
    """``op``'s samples on ``device``: made there (default), or made on CPU and copied
    (``TORCHCONFORM_SAMPLES_ON=cpu``), with every ``cpu`` device argument renamed."""
    if samples_on() == "cpu":
        made = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
        return _named_creation(moved(s, device, "cpu", leaf=requires_grad) for s in made)
    return _named_creation(op.sample_inputs(device, dtype, requires_grad=requires_grad))


def noncontiguous(sample: SampleInput) -> SampleInput:
    """``sample.noncontiguous()``: made with device operators too, so a missing one is a
    sample-creation skip, as for :func:`device_samples`."""
    with _creation_skips():
        return sample.noncontiguous()
