"""Error contracts: OpInfo's ``error_inputs`` on the device, each held to what CPU does.

An ``ErrorInput`` is a sample PyTorch rejects (``error_type``, ``error_regex``): an
overlapping ``out=``, mismatched sizes, a bad ``dim``.  A device kernel that computes
something for it instead of raising hides a caller's bug on that device only.

The rule (docs/classification.md, "The error-input variant"):

* the inputs are made twice by the same OpInfo function, once for CPU and once for the
  device, and paired by their expectation (error type and pattern, in order), so each
  device input is the one CPU is asked about; made natively on each side, so aliasing
  (an ``out=`` that is an input, a view of it, an expanded tensor) is kept exactly;
* an input CPU itself does not reject with the expected type does not apply (the wheel's
  OpInfo expects more than this build of PyTorch does; a device-type branch);
* on the device: the expected error type -> that input passes (the message may differ);
  no error -> "accepted an input CPU rejects"; another error type -> "raised X where CPU
  raises Y"; a backend's own refusal (missing operator, unsupported dtype, ...) is not an
  answer about the input: the test is that backend skip, unless another input already
  failed.
"""
from __future__ import annotations

import unittest
import warnings
from collections import defaultdict
from dataclasses import dataclass, field

import torch

ACCEPTED = "accepted an input CPU rejects"
MAX_LISTED = 3


def has_error_inputs(op) -> bool:
    return getattr(op, "error_inputs_func", None) is not None


def _key(ei) -> tuple:
    return (getattr(ei.error_type, "__name__", str(ei.error_type)), str(ei.error_regex))


def _made(op, device: str):
    """OpInfo's error inputs for ``device``, from its function itself: ``op.error_inputs``
    wraps them in a tracker whose per-input ``inspect.stack()`` (to find the test's sample
    rules, of which this variant has none) cost 30 to 100 ms an input under pytest."""
    func = getattr(op, "error_inputs_func", None)
    return func(op, device) if func is not None else op.error_inputs(device)


def paired(op, device: str):
    """(device ErrorInput, its CPU twin) for every device input CPU has a twin for, and the
    number of device inputs without one."""
    cpu_by_key = defaultdict(list)
    for ei in _made(op, "cpu"):
        cpu_by_key[_key(ei)].append(ei)
    used = defaultdict(int)
    pairs, unpaired = [], 0
    for ei in _made(op, device):
        k = _key(ei)
        if used[k] < len(cpu_by_key[k]):
            pairs.append((ei, cpu_by_key[k][used[k]]))
            used[k] += 1
        else:
            unpaired += 1
    return pairs, unpaired


def _describe(value, depth: int = 0) -> str:
    if isinstance(value, torch.Tensor):
        shape = "x".join(str(s) for s in value.shape) or "scalar"
        text = f"Tensor[{shape}] {str(value.dtype).replace('torch.', '')}"
        if value.numel() and not value.is_contiguous():
            text += f" stride={tuple(value.stride())}"
        return text
    if depth < 2 and isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v, depth + 1) for v in value[:4]) + (", ..." if len(value) > 4 else "")
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _positional_tensors(sample) -> list:
    """(label, tensor) for the tensors among the positional arguments: ``input``,
    ``input[1]`` (in a list), ``arg1``..."""
    found = []
    for name, value in [("input", sample.input)] + [(f"arg{i + 1}", a) for i, a in enumerate(sample.args)]:
        if isinstance(value, torch.Tensor):
            found.append((name, value))
        elif isinstance(value, (list, tuple)):
            found += [(f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return found


def _shared(value, positional) -> str:
    """How a keyword tensor (an ``out=``) relates to the positional ones: the same tensor,
    or memory shared with one; empty when neither."""
    if not isinstance(value, torch.Tensor):
        return ""
    for label, t in positional:
        if t is value:
            return f" (the same tensor as {label})"
    for label, t in positional:
        try:
            if t.untyped_storage().data_ptr() == value.untyped_storage().data_ptr() and t.numel() and value.numel():
                return f" (shares memory with {label})"
        except Exception:  # noqa: BLE001 - a tensor without storage (sparse...) shares nothing we can tell
            continue
    return ""


def describe(op_name: str, sample) -> str:
    """``cat((Tensor[0] float32, Tensor[4x6] float32), dim=0, out=Tensor[0] float32 (the same
    tensor as input[0]))``: shapes, dtypes, strides when not contiguous, and an ``out=`` that
    is or shares memory with an input."""
    positional = _positional_tensors(sample)
    parts = [_describe(sample.input)] + [_describe(a) for a in sample.args]
    parts += [f"{k}={_describe(v)}{_shared(v, positional)}" for k, v in sample.kwargs.items()]
    return f"{op_name}({', '.join(parts)})"


def _call(op, sample):
    with warnings.catch_warnings():
        # a deprecated resize of a non-empty out= on the way to the error is not the point here
        warnings.filterwarnings("ignore", message=".*was resized since it had shape.*")
        return op(sample.input, *sample.args, **sample.kwargs)


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return (lines[0].strip() if lines else "")[:160]


@dataclass
class Checked:
    """What one test's error inputs did on the device."""
    applied: int = 0            # inputs CPU rejects as OpInfo expects
    not_rejected_on_cpu: int = 0
    unpaired: int = 0
    problems: list = field(default_factory=list)   # one line per input the device got wrong
    blocked: BaseException | None = None           # the first backend refusal


def check(op, device: str, op_name: str, backend_refusal) -> Checked:
    """Run ``op``'s error inputs on CPU and on ``device``.  ``backend_refusal(exc)`` says
    whether an exception is the backend's own (a missing operator...), not an answer."""
    pairs, unpaired = paired(op, device)
    got = Checked(unpaired=unpaired)
    for dev_ei, cpu_ei in pairs:
        expected = dev_ei.error_type
        try:
            _call(op, cpu_ei.sample_input)
            cpu_exc = None
        except Exception as exc:  # noqa: BLE001 - CPU's answer, whatever it is
            cpu_exc = exc
        if not isinstance(cpu_exc, expected):
            got.not_rejected_on_cpu += 1
            continue
        got.applied += 1
        said = describe(op_name, dev_ei.sample_input)
        try:
            _call(op, dev_ei.sample_input)
        except unittest.SkipTest:
            raise
        except Exception as exc:  # noqa: BLE001 - judged below
            if backend_refusal(exc):
                got.blocked = got.blocked or exc
            elif not isinstance(exc, expected):
                got.problems.append(f"raised {type(exc).__name__} where CPU raises {type(cpu_exc).__name__}: "
                                    f"{said}: {_first_line(exc)}")
            continue
        got.problems.append(f"{ACCEPTED}: {said} (CPU: {type(cpu_exc).__name__}: {_first_line(cpu_exc)})")
    return got


def verdict(got: Checked) -> None:
    """Raise what the test's outcome is: AssertionError (fail), the backend's refusal (its
    skip), SkipTest (nothing applied); return for a pass."""
    if got.problems:
        more = len(got.problems) - MAX_LISTED
        lines = got.problems[:MAX_LISTED] + ([f"... and {more} more"] if more > 0 else [])
        raise AssertionError(f"{len(got.problems)} of {got.applied} error inputs: " + "; ".join(lines))
    if got.blocked is not None:
        raise got.blocked
    if not got.applied:
        if not (got.not_rejected_on_cpu or got.unpaired):
            raise unittest.SkipTest("OpInfo makes no error input for this device")
        raise unittest.SkipTest(f"no error input applies on CPU ({got.not_rejected_on_cpu} not rejected there, "
                                f"{got.unpaired} without a CPU twin, e.g. tensors on two devices)")
