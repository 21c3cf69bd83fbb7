"""One test per distributed API and case; each runs its program (programs/) on every
rank and passes when every rank's device results equal its CPU (gloo) results."""
from __future__ import annotations

import pytest

from torchconform import settings
from torchconform.core.notes import note
from torchconform.core.traitnotes import trait_note
from torchconform.suites.distributed import launch
from torchconform.collectors.devicecheck import report_touch_elsewhere
from torchconform.suites.common import active_profile, device_type
from torchconform.suites.distributed.rank import backend_string

PROGRAMS = "torchconform.suites.distributed.programs"
FULL = settings.get("TORCHCONFORM_SELECTION") == "full"
DTYPES = ["float32"] + (["float64", "float16", "bfloat16", "int64", "int32"] if FULL else ["int64"])
FORMS = {"all_reduce": ["c10d", "functional"], "broadcast": ["c10d", "functional"],
         "all_gather": ["list", "tensor", "functional"], "reduce_scatter": ["list", "tensor", "functional"],
         "all_to_all": ["list", "tensor", "functional"]}


def _unsupported() -> set[str]:
    return active_profile().unsupported_dtypes


def _cases(collective: str) -> list:
    """Every form in float32; the c10d tensor form (the first) in every other dtype."""
    cases = [pytest.param(collective, form, "float32", id=f"{form}-float32") for form in FORMS[collective]]
    main = FORMS[collective][1] if "tensor" in FORMS[collective] else FORMS[collective][0]
    cases += [pytest.param(collective, main, d, id=f"{main}-{d}") for d in DTYPES[1:]]
    return cases


# device type -> "" (it has a c10d backend) or the skip's words: decided once per test
# process, so a device without one costs no rank start per test
_NO_C10D_BACKEND: dict[str, str] = {}


def no_c10d_backend() -> str:
    """The ``torchconform missing c10d backend: ...`` words when the device under test has
    no c10d backend (the ranks' own check, rank.backend_string, made here once), else ""."""
    device = device_type()
    if device not in _NO_C10D_BACKEND:
        try:
            backend_string(device, active_profile())
            _NO_C10D_BACKEND[device] = ""
        except RuntimeError as exc:
            _NO_C10D_BACKEND[device] = f"{exc} [checked once for the run; no rank started]"
    return _NO_C10D_BACKEND[device]


def run(program: str, **params) -> list[dict]:
    """``program`` of programs/ on every rank; returns each rank's values.  A rank's
    failure is raised as its words; whether the ranks touched the device goes to the
    plugin's device check (this process never does).  Without a c10d backend for the
    device the test is skipped before any rank starts."""
    missing = no_c10d_backend()
    if missing:
        pytest.skip(missing)
    try:
        reports = launch.run_ranks(f"{PROGRAMS}.{program}", params,
                                   device_env=active_profile().distributed.get("device_env", ""))
    except launch.RankFailure as exc:
        raise AssertionError(str(exc)) from None
    touched = [r.get("touched") for r in reports]
    report_touch_elsewhere(None if None in touched else any(touched))
    return [r.get("values", {}) for r in reports]


def _collective_test(collective: str):
    @pytest.mark.parametrize("op,form,dtype", _cases(collective))
    def test(op, form, dtype):
        if dtype in _unsupported():
            pytest.skip(f"{dtype} is not a dtype of this device (profile dtype_policy.unsupported)")
        run(f"collectives:{op}", form=form, dtype=dtype)
    test.__name__ = f"test_collective_{collective}"
    test.__doc__ = f"{collective} on the device equals {collective} on CPU (gloo), on every rank."
    return test


for _name in FORMS:
    globals()[f"test_collective_{_name}"] = _collective_test(_name)


@pytest.mark.parametrize("op", ["barrier"])
def test_collective_barrier(op):
    run("collectives:barrier")


@pytest.mark.parametrize("op", ["send_recv"])
def test_collective_send_recv(op):
    run("collectives:send_recv")


@pytest.mark.parametrize("op,variant", [("ddp", "steps"), ("ddp", "no_sync")])
def test_ddp(op, variant):
    run("training:ddp", variant=variant)


@pytest.mark.parametrize("op,reshard_after_forward", [("fsdp", True), ("fsdp", False)])
def test_fsdp(op, reshard_after_forward):
    run("training:fsdp", reshard_after_forward=reshard_after_forward)


@pytest.mark.parametrize("op", ["fsdp"])
def test_fsdp_state_dict(op):
    run("training:fsdp_state_dict")


@pytest.mark.parametrize("op,placement", [("dtensor", "shard_0"), ("dtensor", "shard_1"), ("dtensor", "replicate")])
def test_dtensor_distribute(op, placement):
    run("dtensor:distribute", placement=placement)


@pytest.mark.parametrize("op,route", [("dtensor", "shard_0->replicate"), ("dtensor", "replicate->shard_0"),
                                      ("dtensor", "shard_0->shard_1")])
def test_dtensor_redistribute(op, route):
    run("dtensor:redistribute", route=route)


@pytest.mark.parametrize("op,dtensor_op", [("dtensor", "matmul"), ("dtensor", "add"), ("dtensor", "sum"),
                                           ("dtensor", "softmax")])
def test_dtensor_ops(op, dtensor_op):
    run("dtensor:ops", op=dtensor_op)


@pytest.mark.parametrize("op", ["tensor_parallel"])
def test_tensor_parallel(op):
    run("dtensor:tensor_parallel")


@pytest.mark.parametrize("op", ["overlap"])
def test_overlap(op):
    """Never fails on no overlap: the fraction is recorded as the ``overlap`` trait."""
    values = run("overlap:overlap")
    fractions = [v["fraction"] for v in values]
    measured = dict(values[0], fraction=min(fractions), overlaps=all(v["overlaps"] for v in values))
    note(trait_note("overlap", {"overlaps": measured["overlaps"], "fraction": measured["fraction"]},
                    {k: measured[k] for k in ("wall_fraction", "host_fraction", "comm_s", "compute_s", "both_s",
                                               "host_blocked_s", "finished_on_return", "bytes", "matmuls", "threshold")}
                    | {"per_rank_fraction": fractions}))
