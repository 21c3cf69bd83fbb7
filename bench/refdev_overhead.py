"""How much does refdev cost over plain CPU?

1. per-op latency of a small ``add`` (2x3 float32) on refdev vs CPU;
2. wall time of a fixed slice of 50 OpInfos (float32 sample inputs, the first
   50 of op_db that support float32) run on refdev vs on CPU.

Prints both figures and the ratios.  Target: the OpInfo slice within 1.2x CPU.
Runs on the ``full`` profile unless TORCHCONFORM_REFDEV_PROFILE says otherwise
(missing operators would make the refdev slice do less work).

    .venv/bin/python bench/refdev_overhead.py [--ops 50] [--repeat 3]
"""
import argparse
import os
import time
import warnings


def small_add_latency(device: str, iters: int) -> float:
    import torch

    a = torch.randn(2, 3, device=device)
    b = torch.randn(2, 3, device=device)
    for _ in range(200):
        torch.add(a, b)
    start = time.perf_counter()
    for _ in range(iters):
        torch.add(a, b)
    return (time.perf_counter() - start) / iters


def slice_time(device: str, ops, repeat: int) -> float:
    import torch

    from torchconform.suites.ops import opinfo_slice

    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for op in ops:
                try:
                    opinfo_slice.run_samples(op, device, torch.float32)
                except Exception:  # noqa: BLE001 - the same failures happen on both devices
                    pass
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20000)
    args = parser.parse_args()
    os.environ.setdefault("TORCHCONFORM_REFDEV_PROFILE", "full")

    import torch

    from torchconform import refdev
    from torchconform.suites.ops import opinfo_slice

    torch.set_num_threads(1)  # both sides single-threaded: the comparison is per-call overhead
    dev = refdev.load()
    cpu_add = small_add_latency("cpu", args.iters)
    dev_add = small_add_latency(dev, args.iters)
    ops = [op for op in opinfo_slice.opinfos() if torch.float32 in op.supported_dtypes("cpu")][: args.ops]
    slice_time("cpu", ops, 1)  # warm caches (sample generation, lazy imports)
    cpu_slice = slice_time("cpu", ops, args.repeat)
    dev_slice = slice_time(dev, ops, args.repeat)
    print(f"profile                {refdev.describe()['profile']}")
    print(f"small add, cpu         {cpu_add * 1e6:8.2f} us")
    print(f"small add, {dev:<11} {dev_add * 1e6:8.2f} us")
    print(f"small add ratio        {dev_add / cpu_add:8.2f}x")
    print(f"{len(ops)}-OpInfo slice, cpu   {cpu_slice:8.3f} s")
    print(f"{len(ops)}-OpInfo slice, {dev:<6} {dev_slice:8.3f} s")
    ratio = dev_slice / cpu_slice
    print(f"OpInfo slice ratio     {ratio:8.2f}x (target <= 1.20x: {'met' if ratio <= 1.2 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
