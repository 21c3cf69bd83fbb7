"""Run one model on the device under test and classify each run.

Per model there are up to three outcomes (``VARIANTS``):

- ``eval``     forward in eval mode under no_grad
- ``train``    one training step: forward in train mode (dropout zeroed by the
               builder), a scalar loss, backward; compares loss and every
               parameter gradient
- ``compile``  forward of ``torch.compile(model, backend=<profile's compile
               backend>)`` in eval mode

Each is compared with the same model (same weights, same inputs) on CPU.  The
CPU reference decides eligibility: a model that cannot be built, or whose CPU
run fails, is ``skip_eligibility`` with that error; only then does the device
run count.  Device errors go through the one classifier, so a missing
operator is ``skip_backend/missing_op`` naming it.  A run that passed but left
device memory allocated is ``error`` (the pytest plugin's leak check, the same
function: collectors/devicecheck.py).

The CPU reference runs also record the ATen overloads each variant reaches
(census/modeltrace.py): eval and train under a RecordFunction observer (no extra
run; under the dispatch mode that stands in where the observer cannot be built, one
extra untraced run for the timing), compile through one extra CPU compile with a
recording backend.  Each set rides
on its variant's outcome (``Outcome.trace``) and is stored with it; a set the
store already holds for these versions (``traced``) is not traced again.
"""
from __future__ import annotations

import copy
import statistics
import time
import warnings
from typing import Callable

from torchconform.census import modeltrace
from torchconform.collectors.devicecheck import DeviceCheck
from torchconform.core.notes import timing_note
from torchconform.core.numeric import Tally
from torchconform.core.outcome import ERROR, PASS, PASS_FALLBACK, SKIP_ELIGIBILITY, Outcome
from torchconform.suites.models import backend as backend_mod
from torchconform.suites.models import catalog
from torchconform.suites.models.compare import assert_same, flatten
from torchconform.suites.models.spec import Unbuildable, split_model_id
from torchconform.core.classify import classify_exception

VARIANTS = ("eval", "train", "compile")
SUITE = "models"


def test_id(model_id: str, variant: str) -> str:
    return f"{SUITE}::{model_id}::{variant}"


def _zero_dropout(model) -> None:
    """Train-mode randomness would make CPU and device differ for no fault of the device."""
    for module in model.modules():
        for attr in ("p", "drop_prob"):
            value = getattr(module, attr, None)
            if isinstance(value, float) and "drop" in type(module).__name__.lower():
                setattr(module, attr, 0.0)


def _to(value, device):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


# -- the three runs; each returns {path: tensor} -----------------------------------------
# ``clock`` (a Clock, or None) times the run's calls: the first (cold: lazy set-up, the
# compile of the compiled run) and ``clock.warm_calls`` more (warm), results of the first.

def _call(fn, clock, snapshot=None):
    """``fn()``'s first result (and ``snapshot()`` taken right after it, before any warm call)."""
    if clock is None:
        first = fn()
        return first if snapshot is None else (first, snapshot())
    return clock.run(fn, snapshot)


def run_eval(model, inputs, compile_backend=None, clock=None) -> dict:
    import torch

    model.eval()
    with torch.no_grad():
        return flatten(_call(lambda: model(**inputs), clock))


def run_train(model, inputs, compile_backend=None, clock=None) -> dict:
    import torch

    model.train()

    def step():
        model.zero_grad(set_to_none=True)
        out = flatten(model(**inputs))
        terms = [t.float().mean() for t in out.values() if t.is_floating_point() and t.requires_grad]
        if not terms:
            raise RuntimeError("no differentiable output to train on")
        loss = torch.stack(terms).sum()
        loss.backward()
        return loss.detach()

    def grads():
        # copied when warm steps follow: a model that draws random numbers in forward
        # (masking, noise) gets other gradients from each step, and the first is compared
        keep = (lambda g: g.detach().clone()) if clock is not None and clock.warm_calls else (lambda g: g)
        return {f"grad.{name}": keep(p.grad) for name, p in model.named_parameters() if p.grad is not None}

    loss, result = _call(step, clock, grads)
    return {"loss": loss, **result}


def run_compile(model, inputs, compile_backend="eager", clock=None) -> dict:
    import torch

    model.eval()
    compiled = torch.compile(model, backend=compile_backend, fullgraph=False)
    frames = _compiled_frames()
    try:
        with torch.no_grad():
            return flatten(_call(lambda: compiled(**inputs), clock))
    finally:
        if clock is not None:
            clock.compiles = _compiled_frames() - frames
        torch._dynamo.reset()


def _compiled_frames() -> int:
    """Frames dynamo has compiled in this process so far (a recompile counts again)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"].get("unique_graphs", 0))


class Clock:
    """Times one run's calls: ``cold`` the first, ``warm`` the median of ``warm_calls``
    more; ``sync`` waits for the device (its work may be asynchronous) before each
    reading.  ``compiles``: frames compiled by the run (the compiled variant only)."""

    def __init__(self, warm_calls: int = 0, sync=None):
        self.warm_calls, self.sync = max(0, int(warm_calls)), sync or (lambda: None)
        self.cold: float | None = None
        self.warm: float | None = None
        self.compiles: int | None = None

    def run(self, fn, snapshot=None):
        """``fn()``'s first result, timed, then the warm calls; with ``snapshot``, returns
        (first result, ``snapshot()`` taken after the first call)."""
        start = time.perf_counter()
        first = fn()
        self.sync()
        self.cold = time.perf_counter() - start
        kept = snapshot() if snapshot is not None else None
        times = []
        for _ in range(self.warm_calls):
            start = time.perf_counter()
            fn()
            self.sync()
            times.append(time.perf_counter() - start)
        self.warm = statistics.median(times) if times else None
        return first if snapshot is None else (first, kept)


def device_sync(device: str):
    """The device module's ``synchronize`` (cpu: nothing to wait for)."""
    import torch

    module = getattr(torch, device.split(":")[0], None)
    sync = getattr(module, "synchronize", None) if device != "cpu" else None
    return sync if callable(sync) else None


_OOM_TEXT = ("can't allocate memory", "not enough memory", "out of memory")


def _reraise_oom(exc: BaseException) -> None:
    if isinstance(exc, MemoryError):
        raise exc
    text = str(exc)
    if any(t in text for t in _OOM_TEXT):
        raise MemoryError(text) from exc


RUNS: dict[str, Callable] = {"eval": run_eval, "train": run_train, "compile": run_compile}


def make_outcome(model_id: str, variant: str, device: str, dtype: str, outcome: str, **fields) -> Outcome:
    family, name = split_model_id(model_id)
    return Outcome(
        test_id=test_id(model_id, variant), outcome=outcome, suite=SUITE, file=family, cls=model_id,
        name=variant, op=model_id, variant=variant, dtype=dtype, device=device,
        repro=(f"torchconform sweep --suite models --selection {model_id} --variants {variant} "
               f"--device {device.split(':')[0]} --build repro-{name}"),
        **fields,
    )


def _device_run(variant, built, device, profile, compile_backend, seed, clock=None) -> tuple[dict, list[str]]:
    """Run ``variant`` on the device; returns results on CPU and the fallback operators seen."""
    import torch

    torch.manual_seed(seed)
    backend_mod.reset_fallback_counts(profile)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = copy.deepcopy(built.model).to(device)
        inputs = _to(built.inputs, device)
        result = RUNS[variant](model, inputs, compile_backend, clock)
        result = {k: v.detach().cpu() for k, v in result.items()}
    ops = sorted(backend_mod.fallback_counts(profile))
    if not ops:
        ops = profile.find_fallback_ops("\n".join(str(w.message) for w in caught))
    return result, ops


def _trace_compile(built, seed: int) -> set | None:
    """The aot graphs' operators of a CPU compile (modeltrace.recording_backend); None
    when the model does not compile on CPU (then there is nothing to say)."""
    import torch

    seen: set = set()
    model = copy.deepcopy(built.model)
    torch.manual_seed(seed)
    try:
        run_compile(model, built.inputs, modeltrace.recording_backend(seen))
    except Exception as exc:
        _reraise_oom(exc)
        return None
    return seen


def run_model(model_id: str, device: str, profile, variants=VARIANTS, compile_backend: str | None = None,
              seed: int = 0, emit: Callable[[str], None] | None = None,
              on_outcome: Callable[[Outcome], None] | None = None, traced=(),
              warm_calls: int = 0) -> list[Outcome]:
    """All outcomes of one model.  ``emit(variant)`` is called before each run starts
    and ``on_outcome(outcome)`` after each ends (the sweep worker streams both, so
    that a crash loses only the run it interrupted).  ``traced``: (variant, torch
    version, library version) of the operator sets the store has; those are not traced.
    ``warm_calls``: calls after the first whose median is the warm time of a passing
    run's ``timing:`` note (torchconform/core/notes.py), on the device and on CPU; 0: cold only.

    Running out of memory is not an outcome of the model but of the process:
    ``MemoryError`` (and allocator failures) propagate, and the sweep worker
    dies like the kernel's OOM killer would have killed it."""
    import torch

    compile_backend = compile_backend or profile.compile_backend or "eager"
    start = time.perf_counter()
    try:
        built = catalog.build(model_id, seed)
        dtype = built.dtype
        _zero_dropout(built.model)
    except Unbuildable as exc:
        took = time.perf_counter() - start
        outcomes = [make_outcome(model_id, v, device, "float32", SKIP_ELIGIBILITY, message=f"unconstructible: {exc}",
                             duration=took / len(variants)) for v in variants]
        for o in outcomes:
            if on_outcome:
                on_outcome(o)
        return outcomes

    # The build time belongs to the model: it is added to its first run, so
    # that durations (used to balance shards) add up to the model's real cost.
    build_time = time.perf_counter() - start
    outcomes = []

    def record(o: Outcome) -> None:
        if sets.get(o.variant) is not None:
            o.trace = {"ops": modeltrace.names(sets[o.variant]), **versions}
        outcomes.append(o)
        if on_outcome:
            on_outcome(o)

    reference: dict = {}
    versions = {"torch_version": torch.__version__, "library_version": catalog.library_version(model_id)}
    stored = {tuple(t) for t in traced}
    to_trace = {v for v in variants if (v, versions["torch_version"], versions["library_version"]) not in stored}
    sets: dict = {}  # variant -> overloads its CPU run reached
    check = DeviceCheck(device.split(":")[0])
    cpu_clocks: dict = {}  # ref kind -> Clock of its CPU reference
    for variant in variants:
        if emit:
            emit(variant)
        begin = time.perf_counter() - (build_time if not outcomes else 0.0)
        # CPU reference: eager on CPU; the compiled run is compared with eager eval.
        ref_kind = "eval" if variant == "compile" else variant
        try:
            if ref_kind not in reference:
                torch.manual_seed(seed)
                model = copy.deepcopy(built.model)  # outside the trace: the device's copy is made on CPU
                tracing = ref_kind in to_trace
                # The observer costs a few percent: the traced run is also the timed one.  The
                # dispatch mode (no compiler for the observer) slows every call: timed apart.
                timed_apart = tracing and modeltrace.native_recorder() is None
                cpu_clocks[ref_kind] = Clock(warm_calls)
                with modeltrace.recording(tracing) as seen:
                    reference[ref_kind] = RUNS[ref_kind](model, built.inputs, None,
                                                         None if timed_apart else cpu_clocks[ref_kind])
                sets[ref_kind] = seen
                if timed_apart:
                    torch.manual_seed(seed)
                    RUNS[ref_kind](copy.deepcopy(built.model), built.inputs, None, cpu_clocks[ref_kind])
            expected = reference[ref_kind]
        except Exception as exc:
            _reraise_oom(exc)
            record(make_outcome(model_id, variant, device, dtype, SKIP_ELIGIBILITY,
                                     message=f"CPU reference failed: {type(exc).__name__}: {exc}",
                                     duration=time.perf_counter() - begin))
            continue
        if variant == "compile" and variant in to_trace:
            sets[variant] = _trace_compile(built, seed)
        before = check.memory()
        errors = Tally()   # of the comparison with the CPU reference, on every outcome that made one
        clock = Clock(warm_calls, device_sync(device))
        try:
            actual, fallback = _device_run(variant, built, device, profile, compile_backend, seed, clock)
            assert_same(actual, expected, variant, errors)
        except Exception as exc:
            _reraise_oom(exc)
            verdict = classify_exception(exc, profile)
            record(make_outcome(model_id, variant, device, dtype, verdict.outcome, kind=verdict.kind,
                                     missing_op=verdict.missing_op, message=verdict.message,
                                     skiplist_entry=verdict.skiplist_entry,
                                     duration=time.perf_counter() - begin, **errors.fields()))
            continue
        leak = check.leak(before) if before is not None else ""
        if leak:
            record(make_outcome(model_id, variant, device, dtype, ERROR, message=leak, fallback_ops=fallback,
                                duration=time.perf_counter() - begin, **errors.fields()))
            continue
        cpu = cpu_clocks.get(ref_kind) or Clock()
        timing = timing_note(device_cold_s=clock.cold, device_warm_s=clock.warm, cpu_cold_s=cpu.cold,
                             cpu_warm_s=cpu.warm, warm_calls=warm_calls, compiles=clock.compiles)
        record(make_outcome(model_id, variant, device, dtype, PASS_FALLBACK if fallback else PASS, message=timing,
                            fallback_ops=fallback, duration=time.perf_counter() - begin, **errors.fields()))
    return outcomes
