"""Run torchconform on a real third-party PrivateUse1 backend and check it against the truth.

For a backend of :data:`BACKENDS` (PyPI packages no one in this project wrote), in
order, each step timed:

1. ``env``     the Debian packages of its driver (apt-get, as root), its own venv in the
               repository root (``.venv-vulkan``...), the pinned torch and backend package,
               and torchconform itself (``pip install -e`` with the torch pin kept); each
               part only when missing, so a second run installs nothing;
2. ``facts``   the backend's registration facts (bench/backends/facts.py) against the
               truth file's ``facts``;
3. ``traits``, ``ops``, ``modules``: ``torchconform run --suite S --selection quick`` into
               a scratch store, a build per suite (names kept in <scratch>/last-builds.json);
               ``ops-cpu`` the ops suite with ``--tc-samples-on cpu`` (by default only for a
               backend whose device cannot make OpInfo samples: opencl);
4. ``census``  ``torchconform census`` of the device into the build of the ops run (``ops-cpu``
               where that runs), as a user would after a run: the census joins what the run's
               tests saw fall back, and the tool prints its census-vs-run agreement line;
5. ``compare`` the stored records of the truth sample against the truth file
               (bench/backends/<backend>-truth.yaml): per expected class, how many the tool
               got right, and "N checked, M wrong"; the census rows of the sample's
               overloads likewise; census-vs-run agreement per sampled OpInfo;
6. ``no-watch`` the ops run again (``ops-cpu``'s options where that runs) with the dispatcher
               observer off (TORCHCONFORM_DISPATCH_WATCH=0): every test must end the same way
               (passed, raised, skipped, crashed) with and without it; only the evidence differs.

``init`` (not in the default steps) does what a new user would: ``torchconform backend init``
writes a profile, ``skiplist lint`` checks it, and ops quick runs with it unchanged (the ops
step's options); each test must end with the record the shipped profile gave it.

``probe`` (not in the default steps) reruns the hand-check (bench/backends/probe.py) and
says where the backend no longer behaves as the truth file says (a new backend version).

    .venv/bin/python bench/backends.py torchvulkan
    .venv/bin/python bench/backends.py opencl --steps compare          # the last builds again
    .venv/bin/python bench/backends.py torchvulkan --steps env,probe   # does the truth still hold?

Scratch (stores, logs, outcome records): --scratch, default /work/scratch/backends, outside
the repository. Exit status: 0 when every step ran (whatever the tool got wrong), 1 when a
step failed, 2 for a usage error.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HERE = REPO / "bench" / "backends"
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (bench/backends/compare.py)
STEPS = ("env", "facts", "traits", "ops", "ops-cpu", "modules", "census", "compare", "no-watch")
OPTIONAL_STEPS = ("init", "probe")
# each makes a build (census: into the ops run's)
SUITE_STEPS = ("traits", "ops", "ops-cpu", "modules", "census", "no-watch", "init")


@dataclass
class Backend:
    name: str
    venv: str
    apt: list[str]
    torch: str
    packages: list[str]          # pip requirement strings, pinned
    module: str                  # what --backend-module names ('' : torch's autoload)
    device: str
    check_libs: list[str] = field(default_factory=list)   # files the driver packages install
    strict_env: str = ""         # NAME=VALUE that makes every fallback raise (probe step)
    torch_source: str = ""       # where the pinned torch comes from, for the error message
    # also run ops with --tc-samples-on cpu (step ops-cpu): a backend lacking the random-number
    # operators that make OpInfo samples measures nothing but sample creation otherwise
    cpu_samples: bool = False

    @property
    def profile(self) -> Path:
        return REPO / "skiplists" / self.name / "profile.yaml"

    @property
    def truth(self) -> Path:
        return HERE / f"{self.name}-truth.yaml"

    @property
    def python(self) -> Path:
        return REPO / self.venv / "bin" / "python"

    @property
    def tool(self) -> Path:
        return REPO / self.venv / "bin" / "torchconform"


BACKENDS = {
    "torchvulkan": Backend(
        name="torchvulkan", venv=".venv-vulkan", apt=["mesa-vulkan-drivers", "libvulkan1"],
        torch="2.13.0", packages=["torchvulkan==0.2.1"], module="torchvulkan", device="vulkan",
        strict_env="TORCHVULKAN_STRICT=1",
        torch_source="this machine's wheel folder (pip's find-links)"),
    "opencl": Backend(
        name="opencl", venv=".venv-opencl", apt=["pocl-opencl-icd", "ocl-icd-libopencl1"],
        # torch-opencl 0.1.0.dev23 is built against torch 2.10-2.12: with 2.13 its _C fails to
        # load (undefined symbol c10::impl::cow::materialize_cow_storage), and through torch's
        # autoload that makes `import torch` itself fail
        torch="2.12.1", packages=["torch-opencl==0.1.0.dev23"], module="", device="opencl", cpu_samples=True,
        torch_source="PyPI (the CUDA build with its nvidia-* wheels, about 3 GB)"),
}


class StepError(Exception):
    """A step that cannot go on: one line naming the cause and the fix."""


def log(msg: str) -> None:
    print(msg, flush=True)


def run(cmd: list, *, cwd=None, env=None, out: Path | None = None, check=True) -> subprocess.CompletedProcess:
    """Run a command; its output to ``out`` (a log file) when given."""
    if out is not None:
        with open(out, "a") as fh:
            fh.write(f"$ {' '.join(map(str, cmd))}\n")
            fh.flush()
            proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                  text=True)
    else:
        proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        where = f"; see {out}" if out is not None else f": {(proc.stderr or proc.stdout).strip()[-300:]}"
        raise StepError(f"`{' '.join(map(str, cmd[:6]))} ...` exited {proc.returncode}{where}")
    return proc


# -- env ------------------------------------------------------------------------------------

def missing_apt(packages: list[str]) -> list[str]:
    if shutil.which("dpkg-query") is None:
        return []
    missing = []
    for pkg in packages:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if "install ok installed" not in proc.stdout:
            missing.append(pkg)
    return missing


def installed_versions(b: Backend) -> dict:
    """{distribution: version} in the backend's venv, and torchconform's location."""
    code = ("import json, importlib.metadata as m\nout = {}\n"
            "for d in m.distributions():\n    out[d.metadata['Name'].lower().replace('_', '-')] = d.version\n"
            "try:\n    import torchconform, os\n    out['@torchconform'] = os.path.dirname(torchconform.__file__)\n"
            "except Exception:\n    pass\nprint(json.dumps(out))")
    proc = run([b.python, "-c", code], check=False, env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def step_env(b: Backend, logs: Path) -> str:
    missing = missing_apt(b.apt)
    if missing:
        if os.geteuid() != 0:
            raise StepError(f"Debian packages {' '.join(missing)} are missing and this is not root; "
                            f"run: sudo apt-get install -y {' '.join(missing)}")
        run(["apt-get", "update", "-qq"], out=logs / "env.log")
        run(["apt-get", "install", "-y", "-qq", *missing], out=logs / "env.log",
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    did = [f"apt {' '.join(missing)}"] if missing else []
    if not b.python.exists():
        run([sys.executable if sys.prefix == sys.base_prefix else "python3", "-m", "venv", REPO / b.venv],
            out=logs / "env.log")
        did.append(f"venv {b.venv}")
    have = installed_versions(b)
    want = {"torch": b.torch, **{p.split("==")[0].lower().replace("_", "-"): p.split("==")[1] for p in b.packages}}
    wrong = [f"{k}=={v}" for k, v in want.items() if have.get(k, "").split("+")[0] != v]
    if wrong:
        proc = run([b.python, "-m", "pip", "install", "-q", f"torch=={b.torch}", *b.packages], out=logs / "env.log",
                   check=False)
        if proc.returncode != 0:
            raise StepError(f"pip could not install torch=={b.torch} {' '.join(b.packages)} into {b.venv} "
                            f"(torch from {b.torch_source}); see {logs / 'env.log'}")
        did.append("pip " + " ".join(wrong))
    if have.get("@torchconform", "") != str(REPO / "torchconform") or wrong:
        # the torch pin keeps pip from replacing the backend's torch with the newest
        run([b.python, "-m", "pip", "install", "-q", "-e", REPO, f"torch=={b.torch}"], out=logs / "env.log")
        did.append("pip -e torchconform")
    return ", ".join(did) if did else "already set up"


# -- facts ------------------------------------------------------------------------------------

FACT_KEYS = ("device", "device_count", "boxed_fallback", "own_aten_kernels", "memory_stats",
             "has_allocation_counter", "compile_backends_added", "c10d_backends_added", "float64_runs_as")


def step_facts(b: Backend, logs: Path, truth: dict) -> str:
    proc = run([b.python, HERE / "facts.py", b.module], check=False)
    if proc.returncode != 0:
        raise StepError(f"facts.py failed in {b.venv}: {proc.stderr.strip().splitlines()[-1:]}")
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    (logs / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    want = truth.get("facts", {})
    diffs = [f"{k}: truth {want[k]!r}, now {facts.get(k)!r}" for k in FACT_KEYS if k in want and want[k] != facts.get(k)]
    for d in diffs:
        log(f"    facts differ: {d}")
    return (f"device {facts['device']}, {facts['own_aten_kernels']} aten kernels, boxed fallback "
            f"{'yes' if facts['boxed_fallback'] else 'no'}, memory_stats {'yes' if facts['memory_stats'] else 'no'}"
            + (f"; {len(diffs)} differ from the truth" if diffs else "; as the truth says"))


# -- runs -------------------------------------------------------------------------------------

def tool_env(b: Backend) -> dict:
    env = dict(os.environ)
    env.pop("TORCHCONFORM_DB", None)
    return env


def step_suite(b: Backend, logs: Path, db: str, step: str, build: str, workers: int | None,
               cpu_samples: bool = False, env: dict | None = None, profile: Path | None = None) -> str:
    suite = "ops" if step in ("no-watch", "init") else step.split("-")[0]
    cmd = [b.tool, "run", "--suite", suite, "--selection", "quick", "--device", b.device,
           "--profile", profile or b.profile,
           "--build", build, "--db", db, "--json"]
    if b.module:
        cmd += ["--backend-module", b.module]
    if workers is not None:
        cmd += ["-n", str(workers)]
    if step == "ops-cpu" or cpu_samples:
        cmd += ["--", "--tc-samples-on", "cpu"]
    proc = run(cmd, cwd=logs, env={**tool_env(b), **(env or {})}, check=False)
    (logs / f"{step}.out").write_text(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 1):   # 1: tests failed, which is what a young backend does
        tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
        raise StepError(f"torchconform run --suite {suite} exited {proc.returncode}: {tail[:300]}")
    data = _last_json(proc.stdout)
    outcomes = (data or {}).get("outcomes", {})
    return " ".join(f"{k} {v}" for k, v in sorted(outcomes.items()) if v) or "no breakdown printed"


def _last_json(text: str):
    start = text.find("{")
    while start != -1:
        try:
            return json.loads(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
    return None


def step_census(b: Backend, logs: Path, db: str, build: str) -> str:
    cmd = [b.tool, "census", "--build", build, "--device", b.device, "--profile", b.profile, "--db", db, "--json"]
    if b.module:
        cmd += ["--backend-module", b.module]
    proc = run(cmd, cwd=logs, env=tool_env(b), check=False)
    (logs / "census.out").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [""])[-1]
        raise StepError(f"torchconform census exited {proc.returncode}: {tail[:300]}")
    data = _last_json(proc.stdout) or {}
    (logs / "census.json").write_text(json.dumps(data) + "\n")
    said = " ".join(f"{k} {v}" for k, v in sorted((data.get("counts") or {}).items()))
    agreement = data.get("agreement")
    if agreement:
        said += (f"; census vs the build's tests: {agreement['seen_by_both']} operators known to both, "
                 f"{agreement['agree']} agree, {len(agreement['disagree'])} disagree")
        for d in agreement["disagree"]:
            log(f"    census/run disagree: {d['op']}: census {d['census']}, tests {d['tests']}")
    return said


def step_init(b: Backend, logs: Path, db: str, builds: dict, workers: int | None) -> str:
    """backend init, skiplist lint, ops quick with the written profile, against the ops build."""
    path = logs / "init-profile.yaml"
    cmd = [b.tool, "backend", "init", b.device, "-o", path, "--force"] + (["--module", b.module] if b.module else [])
    proc = run(cmd, cwd=logs, env=tool_env(b), check=False)
    (logs / "init.out").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [""])[-1][:300]
        raise StepError(f"backend init exited {proc.returncode}: {tail}")
    lint = run([b.tool, "skiplist", "lint", path], cwd=logs, env=tool_env(b), check=False)
    if lint.returncode != 0:
        raise StepError(f"skiplist lint refused {path}: {(lint.stdout + lint.stderr).strip()[-300:]}")
    said = step_suite(b, logs, db, "init", builds["init"], workers, profile=path)
    same = compare.same_records(export(b, logs, db, builds["ops"]), export(b, logs, db, builds["init"]))
    return f"profile {path.name} linted clean; {said}; {same}"


# -- compare ----------------------------------------------------------------------------------

def export(b: Backend, logs: Path, db: str, build: str) -> list[dict]:
    out = logs / f"{build}.json"
    proc = run([b.tool, "export", "--build", build, "--format", "json", "--db", db, "--out", out], cwd=logs,
               env=tool_env(b), check=False)
    if proc.returncode != 0:
        raise StepError(f"no stored build {build} in {db} (run the suite steps first): "
                        f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}")
    return json.loads(out.read_text())["outcomes"]


def step_probe(b: Backend, logs: Path, truth: dict) -> str:
    out = logs / "probe"
    cmd = [b.python, HERE / "probe.py", "--module", b.module, "--out", out]
    if b.strict_env:
        cmd += ["--strict-env", b.strict_env]
    run(cmd, out=logs / "probe.log")
    sys.path.insert(0, str(HERE))
    from verdict import derive

    records = json.loads((out / "probe.json").read_text())
    differ = 0
    for entry in truth.get("operators", []):
        rec = records.get(entry["case"])
        now = derive(rec) if rec else {"evidence": "not probed"}
        if now["evidence"] != entry["evidence"]:
            differ += 1
            log(f"    {entry['case']}: truth {entry['evidence']}, probe now {now['evidence']}")
    return f"{len(truth.get('operators', []))} cases probed, {differ} differ from the truth"


# -- main -------------------------------------------------------------------------------------

def load_truth(b: Backend) -> dict:
    try:
        import yaml
    except ImportError:
        raise StepError("PyYAML is not importable by this python; run with the project's venv: "
                        ".venv/bin/python bench/backends.py ...") from None
    if not b.truth.exists():
        raise StepError(f"no truth file {b.truth}")
    return yaml.safe_load(b.truth.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", help=f"one of {', '.join(BACKENDS)}")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated, in this order: {', '.join(STEPS + OPTIONAL_STEPS)}")
    parser.add_argument("--scratch", default="/work/scratch/backends", help="stores, logs and records (outside the repo)")
    parser.add_argument("--builds", default="", help="build-name prefix: PREFIX-<step> for every suite step "
                        "(default: new builds for the steps run, the latest stored ones for the rest)")
    parser.add_argument("-n", "--workers", type=int, default=None, help="pytest-xdist workers (default: the tool's)")
    args = parser.parse_args()
    b = BACKENDS.get(args.backend)
    if b is None:
        print(f"backends.py: unknown backend {args.backend!r}; use one of {', '.join(BACKENDS)}", file=sys.stderr)
        return 2
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS + OPTIONAL_STEPS]
    if unknown:
        print(f"backends.py: unknown step {unknown[0]!r}; use {', '.join(STEPS + OPTIONAL_STEPS)}", file=sys.stderr)
        return 2
    logs = Path(args.scratch) / b.name
    logs.mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{logs / 'store.db'}"
    if "ops-cpu" in steps and not b.cpu_samples and args.steps == ",".join(STEPS):
        steps.remove("ops-cpu")   # by default only where device-made samples measure nothing else
    # each suite step's build: new ones for the steps this invocation runs, the latest stored
    # ones (last-builds.json) for the rest, so `--steps compare` compares what ran last
    last = logs / "last-builds.json"
    latest = json.loads(last.read_text()) if last.exists() else {}
    stamp = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%SZ}"
    builds = {}
    for s in SUITE_STEPS:
        if args.builds:
            builds[s] = f"{args.builds}-{s}"
        elif s in steps:
            builds[s] = f"{b.name}-bench-{stamp}-{s}"
        else:
            builds[s] = latest.get(s, f"(no {s} build yet)")
    # the census goes into the ops run's build (census and tests of one build are joined)
    builds["census"] = builds["ops-cpu" if b.cpu_samples else "ops"]
    log(f"backend {b.name} (device {b.device}), scratch {logs}")
    status = 0
    truth: dict = {}
    for step in [s for s in STEPS + OPTIONAL_STEPS if s in steps]:
        t0 = time.perf_counter()
        try:
            if step != "env" and not b.python.exists():
                raise StepError(f"no environment {b.venv}; run the env step first (--steps env)")
            if step in ("facts", "compare", "probe") and not truth:
                truth = load_truth(b)
            if step == "env":
                said = step_env(b, logs)
            elif step == "facts":
                said = step_facts(b, logs, truth)
            elif step in ("traits", "ops", "ops-cpu", "modules"):
                said = step_suite(b, logs, db, step, builds[step], args.workers)
            elif step == "init":
                said = step_init(b, logs, db, builds, args.workers)
            elif step == "no-watch":
                said = step_suite(b, logs, db, step, builds[step], args.workers, cpu_samples=b.cpu_samples,
                                  env={"TORCHCONFORM_DISPATCH_WATCH": "0"})
                said += "; " + compare.same_without_watch(
                    export(b, logs, db, builds["ops-cpu" if b.cpu_samples else "ops"]),
                    export(b, logs, db, builds[step]))
            elif step == "census":
                said = step_census(b, logs, db, builds["census"])
            elif step == "compare":
                said = compare.step_compare(b, logs, db, builds, truth, export, StepError)
            else:
                said = step_probe(b, logs, truth)
            log(f"{step:8s} {time.perf_counter() - t0:7.1f} s  {said}")
            if step in SUITE_STEPS:
                latest[step] = builds[step]
                last.write_text(json.dumps(latest, indent=1) + "\n")
        except StepError as exc:
            log(f"{step:8s} {time.perf_counter() - t0:7.1f} s  FAILED: {exc}")
            status = 1
            if step == "env":
                break
    return status


if __name__ == "__main__":
    sys.exit(main())
