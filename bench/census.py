"""How long the census of the whole ATen operator set takes on refdev (budget: 30 s).

Times, in one process: device set-up (refdev build cached, registration), the
dispatcher classification of every aten overload, the tracing of every composite
on meta tensors, and storing it into a fresh SQLite file.

    python bench/census.py [--profile young-backend|full]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=os.environ.get("TORCHCONFORM_REFDEV_PROFILE", "young-backend"))
    args = parser.parse_args()
    os.environ["TORCHCONFORM_REFDEV_PROFILE"] = args.profile

    from torchconform.census import dispatch, records, trace
    from torchconform.census.take import quiet_output, take_census
    from torchconform.db.store import open_store

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
        traced = sum(trace.trace_composite(r.op, keys.backend) is not None for r in composites)
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
    return 0 if total < 30 else 1


if __name__ == "__main__":
    raise SystemExit(main())
