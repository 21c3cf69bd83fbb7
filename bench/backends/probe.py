"""Gather the evidence for each operator of the hand-checked sample on a real backend.

Runs inside the backend's own environment (its torch, its backend package); uses
nothing of torchconform's, so that what it shows is independent of the tool being
checked. The cases (bench/backends/cases.py) run one after another in one process (a
process that dies is restarted after the case it died in), each gathering:

* the call on device tensors, under the profiler: ``at::native::cpu_fallback`` moves
  the arguments with ``aten::_to_cpu``, so an ``aten::_to_cpu`` event under an operator
  proves that operator ran through the boxed CPU fallback; the raised message, if any;
  warnings (Python's and the C++ ones written to stderr); the result against CPU's;
* the overloads the call asked the device for (a dispatch mode) and, for them and the
  case's own, the device's slot in the dispatcher's table (``kernel``, ``backend
  fallback``, ``default backend kernel``, ``math kernel``, ``none``);
* the quick-selection OpInfo's float32 samples (made on the device, as upstream and the
  ops suite do; made on CPU and copied too when making them failed), the same evidence
  over all samples;
* with ``--strict-env NAME=VALUE`` the call again in a process with that variable set
  (torchvulkan's ``TORCHVULKAN_STRICT=1`` raises on every fallback).

Warnings a backend gives once per process (torchvulkan's) show for the first case that
falls back only; the profiler's evidence is per call.

    python probe.py --module torchvulkan --out DIR [--strict-env TORCHVULKAN_STRICT=1] [--cases a,b]

Writes DIR/<case>.json per case and DIR/probe.json (all of them); prints one line per case.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIRST_LINE = 400


def first_line(text: str) -> str:
    return (str(text).strip().splitlines() or [""])[0][:FIRST_LINE]


def slot_of(op: str) -> str:
    """The device's entry in ``op``'s dispatch table: kernel, backend fallback, ..., none."""
    import torch

    try:
        table = torch._C._dispatch_dump_table(op)
    except RuntimeError:
        return "no such operator"
    for line in table.splitlines():
        if line.startswith("PrivateUse1:"):
            return line[line.rfind("[") + 1:line.rfind("]")] if "[" in line else line
    return "none"


def leaves(value):
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)


def judge(case, got, want) -> tuple[bool | None, str]:
    """Is the device's result right? (None: not judged)."""
    import torch

    got, want = list(leaves(got)), list(leaves(want))
    if case.check == "none":
        return None, ""
    if case.check == "rng":
        x = got[0].cpu().double()
        lo, hi = case.rng_range
        ok = x.numel() == want[0].numel() and bool(((x >= lo) & (x <= hi)).all()) and x.unique().numel() > 1
        return ok, f"min {x.min().item():.4g} max {x.max().item():.4g} distinct {x.unique().numel()}"
    if len(got) != len(want):
        return False, f"{len(got)} outputs, CPU gives {len(want)}"
    worst = 0.0
    for g, w in zip(got, want):
        g = g.cpu()
        if g.shape != w.shape or g.dtype != w.dtype:
            return False, f"shape/dtype {tuple(g.shape)} {g.dtype} vs CPU {tuple(w.shape)} {w.dtype}"
        if case.check == "exact" or not w.is_floating_point():
            if not torch.equal(g, w):
                return False, "values differ"
            continue
        try:
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
        except AssertionError:
            return False, f"not close: max abs diff {(g - w).abs().nan_to_num(0).max().item():.3g}"
        worst = max(worst, (g - w).abs().nan_to_num(0).max().item() if g.numel() else 0.0)
    return True, f"max abs diff {worst:.3g}"


def fallback_parents(prof) -> list[str]:
    """Operators under which ``aten::_to_cpu`` ran: the boxed CPU fallback's signature."""
    out = []
    for e in prof.events():
        if e.name == "aten::_to_cpu" and e.cpu_parent is not None and e.cpu_parent.name != "aten::_to_cpu":
            if e.cpu_parent.name not in out:
                out.append(e.cpu_parent.name)
    return out


class StderrTap:
    """The process's fd 2 into a file for the block (C++ warnings bypass sys.stderr)."""

    def __enter__(self):
        self.file = tempfile.TemporaryFile(mode="w+b")
        sys.stderr.flush()
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        self.text = self.file.read().decode(errors="replace")
        self.file.close()
        return False


def run_call(fn, dev):
    """(result, exception) of fn(dev) under the profiler, and the profiler."""
    from torch.profiler import ProfilerActivity, profile

    result = exc = None
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        try:
            result = fn(dev)
            for x in leaves(result):
                x.cpu()     # the copy back is part of the call: asynchronous errors show here
        except Exception as e:   # noqa: BLE001 - every failure is evidence
            exc = e
    return result, exc, prof


def asked_overloads(fn, dev) -> list[str]:
    """Overloads with a device tensor in their arguments or results (post-autograd)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            flat = list(leaves(list(args) + list((kwargs or {}).values()))) + list(leaves(out))
            name = func._schema.name + ("." + func._overloadname if func._overloadname != "default" else "")
            on_dev = any(x.device.type == dev for x in flat) or str((kwargs or {}).get("device", "")).startswith(dev)
            if on_dev and name not in seen:
                seen.append(name)
            return out

    try:
        with Watch():
            fn(dev)
    except Exception:   # noqa: BLE001 - the call's own failure is recorded elsewhere
        pass
    return seen


def evidence(result, exc, prof, cpu_result, case, dev) -> dict:
    parents = fallback_parents(prof)
    out = {"outcome": "raised" if exc else "ok", "fallback_parents": parents}
    if exc is not None:
        out["exc_type"] = type(exc).__name__
        out["message"] = first_line(exc)
        cause = exc.__cause__ or exc.__context__
        if cause is not None:
            out["cause"] = f"{type(cause).__name__}: {first_line(cause)}"
    elif cpu_result is not None:
        out["correct"], out["detail"] = judge(case, result, cpu_result)
    return out


def move_sample(sample, target: str, from_type: str):
    """An OpInfo sample with every tensor on ``target`` and device arguments renamed."""
    import torch

    def mv(v):
        if isinstance(v, torch.Tensor):
            y = v.detach().to(target, copy=True)
            return y
        if isinstance(v, torch.device) and v.type == from_type:
            return torch.device(target)
        if isinstance(v, str) and v.split(":")[0] == from_type:
            return target
        if isinstance(v, (list, tuple)):
            return type(v)(mv(x) for x in v)
        if isinstance(v, dict):
            return {k: mv(x) for k, x in v.items()}
        return v

    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput(mv(sample.input), args=mv(tuple(sample.args)), kwargs=mv(dict(sample.kwargs)))


def opinfo_evidence(name: str, dev: str, case) -> dict:
    """compare_cpu float32 over the OpInfo's samples: made on the device, then on CPU if that failed."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [o for o in op_db if (o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")) == name]
    if not ops:
        return {"error": f"no OpInfo {name} in this torch"}
    op = ops[0]
    if torch.float32 not in op.supported_dtypes(dev) and torch.float32 not in op.supported_dtypes("cpu"):
        return {"error": "float32 not supported"}
    out: dict = {"opinfo": name}
    for where in ("device", "cpu"):
        torch.manual_seed(0)
        parents: list[str] = []
        res = {"samples": 0, "outcome": "ok", "fallback_parents": parents, "wrong_samples": 0}
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            try:
                made = list(op.sample_inputs(dev if where == "device" else "cpu", torch.float32))
                if where == "cpu":
                    made = [move_sample(s, dev, "cpu") for s in made]
            except Exception as e:   # noqa: BLE001
                res.update(outcome="creation raised", exc_type=type(e).__name__, message=first_line(e))
                made = None
        if made is not None:
            for s in made:
                ref_in = move_sample(s, "cpu", dev)
                try:
                    want = op(ref_in.input, *ref_in.args, **ref_in.kwargs)
                except Exception:   # noqa: BLE001 - a sample CPU cannot compute does not apply
                    continue
                res["samples"] += 1
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    try:
                        got = op(s.input, *s.args, **s.kwargs)
                        got_cpu = [x.cpu() for x in leaves(got)]
                    except Exception as e:   # noqa: BLE001
                        res.update(outcome="raised", exc_type=type(e).__name__, message=first_line(e))
                        got_cpu = None
                for p in fallback_parents(prof):
                    if p not in parents:
                        parents.append(p)
                if got_cpu is None:
                    break
                w = list(leaves(want))
                ok = len(w) == len(got_cpu) and all(
                    g.shape == x.shape and (torch.allclose(g.double(), x.double(), rtol=1e-4, atol=1e-5, equal_nan=True)
                                            if x.is_floating_point() else torch.equal(g, x))
                    for g, x in zip(got_cpu, w))
                res["wrong_samples"] += 0 if ok else 1
        out[f"samples_on_{where}"] = res
        if res["outcome"] != "creation raised":
            break
    return out


def setup(module: str) -> str:
    sys.path.insert(0, str(HERE))
    import torch

    if module:
        importlib.import_module(module)
    return torch._C._get_privateuse1_backend_name()


def one(case, dev: str) -> dict:
    """All the evidence for one case (warnings: a backend that warns once per process
    warns for the first fallback of the batch only; the profiler's evidence is per call)."""
    import torch

    record: dict = {"case": case.name, "aten": case.aten, "opinfo": case.opinfo, "device": dev,
                    "torch": torch.__version__}
    with warnings.catch_warnings(record=True) as caught, StderrTap() as tap:
        warnings.simplefilter("always")
        result, exc, prof = run_call(case.call, dev)
    try:
        cpu_result = case.call("cpu")
    except Exception as e:   # noqa: BLE001
        cpu_result = None
        record["cpu_raised"] = f"{type(e).__name__}: {first_line(e)}"
    record["call"] = evidence(result, exc, prof, cpu_result, case, dev)
    said = [first_line(w.message) for w in caught] + [ln for ln in tap.text.splitlines() if "arn" in ln]
    record["call"]["warnings"] = [w for w in said if "USDT" not in w][:5]
    asked = asked_overloads(case.call, dev)
    record["dispatch"] = {op: slot_of(op) for op in dict.fromkeys(case.aten + asked)}
    record["asked"] = asked
    if case.opinfo:
        record["opinfo_float32"] = opinfo_evidence(case.opinfo, dev, case)
    return record


def strict(case, dev: str) -> dict:
    result, exc, prof = run_call(case.call, dev)
    out = {"outcome": "raised" if exc else "ok"}
    if exc is not None:
        out["message"] = first_line(exc)
    return out


def batch(names: list[str], module: str, mode: str) -> None:
    """Run cases in this process, one JSON line each as it finishes (a crash loses only the current one)."""
    dev = setup(module)
    from cases import BY_NAME

    for name in names:
        rec = one(BY_NAME[name], dev) if mode == "one" else strict(BY_NAME[name], dev)
        print(json.dumps({"name": name, "record": rec}), flush=True)


def run_batches(args, names: list[str], mode: str, env: dict) -> dict:
    """{case: record}; a process that dies is restarted after the case it died in."""
    done: dict = {}
    todo = list(names)
    while todo:
        cmd = [sys.executable, __file__, "--module", args.module, "--batch", mode, "--cases", ",".join(todo)]
        # stderr to a file: the profiler and the backends write much there, and a full
        # pipe nobody reads would block the child
        with tempfile.TemporaryFile(mode="w+") as errfile:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errfile, text=True, env=env)
            for line in proc.stdout:
                if line.startswith('{"name"'):
                    got = json.loads(line)
                    done[got["name"]] = got["record"]
                    todo.remove(got["name"])
                    if mode == "one":
                        report(got["name"], got["record"])
            proc.wait()
            errfile.seek(0)
            err = errfile.read()
        if todo and proc.returncode != 0:
            dead = todo.pop(0)
            done[dead] = {"process": f"exit {proc.returncode}", "stderr_tail": err[-800:]}
            print(f"{dead:32s} process died: exit {proc.returncode}", flush=True)
        elif todo:
            raise SystemExit(f"probe: the batch ended without running {todo[0]}: {err[-300:]}")
    return done


def report(name: str, rec: dict) -> None:
    call = rec.get("call", {})
    print(f"{name:32s} {call.get('outcome')} fb={call.get('fallback_parents')} ok={call.get('correct')} "
          f"{call.get('message', '')[:90]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default="", help="module whose import registers the backend ('' : autoload)")
    parser.add_argument("--out", help="folder for the evidence")
    parser.add_argument("--strict-env", default="", help="NAME=VALUE: also run each call with this set")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--batch", choices=("one", "strict"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from cases import CASES

    names = [c.name for c in CASES] if not args.cases else args.cases.split(",")
    if args.batch:
        batch(names, args.module, args.batch)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    records = run_batches(args, names, "one", dict(os.environ))
    if args.strict_env:
        k, _, v = args.strict_env.partition("=")
        strict_records = run_batches(args, names, "strict", dict(os.environ, **{k: v}))
        for name, rec in strict_records.items():
            records[name]["strict"] = {"env": args.strict_env, **rec}
    for name, rec in records.items():
        (out / f"{name}.json").write_text(json.dumps(rec, indent=1) + "\n")
    (out / "probe.json").write_text(json.dumps(records, indent=1) + "\n")
    print(f"probe: {len(records)} cases in {time.perf_counter() - t0:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
