"""Device probes: one ordinary test per trait (stored, gated and shown like any
other outcome).  Each measures its trait on the device under test against the CPU
and leaves the measurement as a trait note, the message of its passing outcome
(docs/traits.md); a trait the backend does not let us measure passes with
``"measurable": false`` and the reason, never a guess."""
import pytest

from torchconform.core.notes import note
from torchconform.core.traitnotes import trait_note
from torchconform.suites.traits import compiled, eager, host


def _record(name: str, measured: dict) -> dict:
    note(trait_note(name, measured["values"], measured["evidence"]))
    return measured["values"]


@pytest.mark.parametrize("dtype", eager.FLOATING)
def test_precision(dtype):
    values = _record(f"precision.{dtype}", eager.measure_precision(dtype))
    assert values["executes_as"] is None or values["executes_as"] in eager.FLOATING


@pytest.mark.parametrize("dtype", eager.FLOATING)
def test_precision_matches_profile(dtype):
    """The backend profile's dtype_policy.downcast must say what the device measurably does."""
    measured = eager.measure_precision(dtype)["values"]["executes_as"]
    if measured is None:
        pytest.skip(f"{dtype} precision is not measurable on this backend")
    declared = eager.declared_executes_as(dtype)
    assert measured == declared, (
        f"{dtype} computes as {measured} on this device but the backend profile's dtype_policy.downcast "
        f"says {declared}; declare {{{dtype}: {measured}}} there")


def test_noncontiguous_copy():
    values = _record("noncontiguous_copy", compiled.measure_noncontiguous_copy())
    assert values["copies"] is None or values["copies"] == (values["bytes_per_call"] > 0)


def test_static_shapes():
    values = _record("static_shapes", compiled.measure_static_shapes())
    assert values["compiles"] >= 1 and values["cold_compile_s"] > 0


def test_fallback():
    eager_part = eager.measure_eager_fallback()
    compile_part = compiled.measure_compile_fallback()
    values = dict(eager_part["values"], **compile_part["values"])
    _record("fallback", {"values": values, "evidence": dict(eager_part["evidence"], **compile_part["evidence"])})
    assert values["eager_calls"] >= len(values["eager_ops"])


def test_placeholder_outputs():
    _record("placeholder_outputs", compiled.measure_placeholder_outputs())


def test_memory_stats():
    _record("memory_stats", host.measure_memory_stats())


def test_environment():
    values = _record("environment", host.measure_environment())
    assert values["cpu_count"] and values["torch"]
