"""How long the census of the whole ATen operator set takes on refdev (budget: 30 s), and
what the per-model operator trace costs against the plain CPU reference run (target 1.2x).

Times, in one process: device set-up (refdev build cached, registration), the
dispatcher classification of every aten overload, the tracing of every composite
on meta tensors, and storing it into a fresh SQLite file.  Then, per model, the
models suite's CPU reference (eval + train, model copy included, as check.py makes
it) plain and under the recording dispatch mode, interleaved, best of --repeats;
with --compile also the extra CPU compile that records the compile set.

    python bench/census.py [--profile young-backend|full] [--models hf/bert,...] [--repeats N] [--compile]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from torchconform import settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=settings.get("TORCHCONFORM_REFDEV_PROFILE"))
    parser.add_argument("--models", default=",".join(MODELS), help="models whose trace overhead to time ('' = none)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="also time the compile set's extra CPU compile")
    args = parser.parse_args()
    os.environ["TORCHCONFORM_REFDEV_PROFILE"] = args.profile

    from torchconform.census import records, trace
    from torchconform.core import dispatch
    from torchconform.census.take import quiet_output, take_census
    from torchconform.db.opening import open_store

    t0 = time.perf_counter()
    cpu0 = time.process_time()
    census = take_census("refdev")
    total = time.perf_counter() - t0
    # The parts again, now that the device is set up (setup_device is idempotent).
    t1 = time.perf_counter()
    keys = dispatch.device_keys("refdev")
    rows = dispatch.classify(dispatch.aten_ops(), keys, python_decomps=dispatch.python_decompositions())
    t2 = time.perf_counter()
    composites = [r for r in rows if r.status == dispatch.COMPOSITE]
    with quiet_output():
        traced = sum(trace.trace_composite(r.op, dispatch.trace_key(r.op, keys)) is not None for r in composites)
    t3 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, open_store(os.path.join(tmp, "c.db")) as store:
        records.save(store, "bench", census)
    t4 = time.perf_counter()
    counts = ", ".join(f"{k} {v}" for k, v in census.counts().items())
    print(f"refdev profile {args.profile}: {len(census.rows)} aten overloads ({counts})")
    print(f"  census (set-up + classify + trace)  {total:6.2f} s wall, {time.process_time() - cpu0:6.2f} s CPU")
    print(f"    classify                          {t2 - t1:6.2f} s")
    print(f"    trace {len(composites)} composites ({traced} traced)  {t3 - t2:6.2f} s")
    print(f"  store into SQLite                   {t4 - t3:6.2f} s")
    print(f"  budget 30 s: {'ok' if total < 30 else 'OVER'}")
    ids = [m for m in args.models.split(",") if m]
    if ids:
        trace_overhead(ids, args.repeats, args.compile)
    return 0 if total < 30 else 1


MODELS = ("hf/bert", "hf/gpt2", "hf/llama", "hf/resnet", "hf/t5")


def _seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def trace_overhead(model_ids, repeats: int, with_compile: bool) -> None:
    import copy

    import torch

    from torchconform.census import modeltrace
    from torchconform.suites.models import catalog
    from torchconform.suites.models.check import _zero_dropout, run_compile, run_eval, run_train

    torch.set_num_threads(1)  # as a sweep worker runs (--threads 1)

    def reference(built, traced, native=True):
        for run in (run_eval, run_train):
            torch.manual_seed(0)
            model = copy.deepcopy(built.model)
            with modeltrace.recording(traced, native=native):
                run(model, built.inputs)

    recorder = "RecordFunction observer" if modeltrace.native_recorder() else "dispatch mode (no observer built)"
    print(f"per-model trace overhead (CPU reference eval + train, best of {repeats}; target <= 1.2x); "
          f"recorder: {recorder}, beside the dispatch mode it replaces:")
    sums = [0.0, 0.0, 0.0]
    worst = []
    for model_id in model_ids:
        built = catalog.build(model_id, 0)
        _zero_dropout(built.model)
        for traced, native in ((False, True), (True, True), (True, False)):
            reference(built, traced, native)  # warm every path
        plain = traced = mode = float("inf")
        for _ in range(repeats):  # interleaved: a load change on the machine hits all three
            plain = min(plain, _seconds(lambda: reference(built, False)))
            traced = min(traced, _seconds(lambda: reference(built, True)))
            mode = min(mode, _seconds(lambda: reference(built, True, native=False)))
        sums[0] += plain
        sums[1] += traced
        sums[2] += mode
        worst.append(traced / plain)
        line = (f"  {model_id:12s} plain {plain * 1e3:7.1f} ms  traced {traced * 1e3:7.1f} ms  {traced / plain:4.2f}x"
                f"  (mode {mode * 1e3:7.1f} ms  {mode / plain:4.2f}x)")
        if with_compile:
            seen: set = set()
            plain_c = _seconds(lambda: run_compile(copy.deepcopy(built.model), built.inputs, "aot_eager"))
            rec_c = _seconds(lambda: run_compile(copy.deepcopy(built.model), built.inputs,
                                                 modeltrace.recording_backend(seen)))
            line += f"  | compile aot_eager {plain_c:5.2f} s, recording {rec_c:5.2f} s ({len(seen)} ops)"
        print(line)
    ratio = sums[1] / sums[0]
    print(f"  all models: plain {sums[0] * 1e3:.1f} ms, traced {sums[1] * 1e3:.1f} ms: {ratio:.2f}x "
          f"(the dispatch mode: {sums[2] * 1e3:.1f} ms, {sums[2] / sums[0]:.2f}x; worst model "
          f"{max(worst):.2f}x) "
          f"({'ok' if ratio <= 1.2 else 'over 1.2x'} on the first trace); a set stored for the same torch and "
          "library versions is not traced again (sweep Task.traced): 1.00x from then on")


if __name__ == "__main__":
    raise SystemExit(main())
