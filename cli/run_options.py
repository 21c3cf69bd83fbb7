"""The options of ``torchconform run`` (argparse declarations only; cli/cmd_run.py runs them).

The shared ones (``--db``, ``--build``, ``--device``, ``--json``) come from cli/options.py;
a suite set's steps pass many of these on to their own runs (cli/run_set.py ``PASSED_ON``).
"""
from __future__ import annotations

from torchconform.cli.options import add_build, add_db, add_device, add_json


def add_run_options(p) -> None:
    """Declare every option of ``run`` on its parser ``p``."""
    p.add_argument("--suite", default="ops",
                   help="suite to run (default: ops), or all: the suite set 'all' of suites/sets.yaml (traits, ops full, modules "
                        "full, upstream when --pytorch-src is given, models full, distributed full) as runs of one build")
    p.add_argument("--suite-set", default=None, metavar="NAME|PATH",
                   help="run a suite set (a name of suites/sets.yaml, or a YAML file of that shape) into one build")
    p.add_argument("--shards", type=int, default=1,
                   help="split the selection into N shards (balanced by earlier builds' durations on this device)")
    p.add_argument("--shard", type=int, default=0, help="the shard this machine runs (0-based; with --shards)")
    p.add_argument("--resume", action="store_true",
                   help="finish a build an interrupted run left unfinished: run only the tests it lacks "
                        "(with a suite set, only the steps not finished); same --build, --db and selection")
    p.add_argument("--selection", default="quick", choices=("quick", "full"), help="selection of the suite (default: quick)")
    add_device(p, default="refdev",
               help="device under test (default: refdev); any PrivateUse1 name with --backend-module, even "
                    "without a profile (defaults probed at start-up; `torchconform backend init` writes one)")
    p.add_argument("--profile", default=None,
                   help="backend profile name or profile.yaml path (default: the device's; docs/profiles.md)")
    p.add_argument("--refdev-profile", default=None,
                   help="refdev operator profile (young-backend, full or a YAML path; default $TORCHCONFORM_REFDEV_PROFILE or young-backend)")
    p.add_argument("--backend-module", default=None, help="module whose import registers the backend")
    add_build(p, required=False, help="build name (default <device>-<profile>-<UTC time>)")
    p.add_argument("-n", "--workers", type=int, default=None,
                   help="pytest-xdist workers (default: CPU count); 0 runs serially without crash isolation")
    p.add_argument("--junit", default=None, help="also write JUnit XML here")
    p.add_argument("--jsonl", default=None, help="outcome records as JSON lines (default .torchconform/runs/<build as a safe file name>.jsonl)")
    add_db(p)
    p.add_argument("--no-db", action="store_true", help="do not store the run in the results store")
    p.add_argument("--timeout", type=float, default=600.0, help="per-test timeout in seconds (default 600; 0: none)")
    p.add_argument("--memory-limit-mb", type=int, default=0, metavar="N",
                   help="a test may grow its worker's memory (address space) by at most N MiB; past it the test is "
                        "a crash 'ran out of memory (limit N MiB)' and the worker is replaced (default 0: no limit; needs -n 1 or more)")
    p.add_argument("--ops", default=None, help="comma-separated OpInfo names to restrict the suite to")
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    p.add_argument("--pytorch-src", default=None, help="upstream suite: PyTorch source checkout ($TORCHCONFORM_PYTORCH_SRC)")
    p.add_argument("--files", default=None, help="upstream suite: comma-separated test files (e.g. test_ops,test_nn)")
    p.add_argument("--spec", default=None, metavar="PATH",
                   help="upstream suite: a torch-neuronx spec (JSON, or its `skiplist import` YAML) selects the tests "
                        "and brings its xfail/skip entries (docs/neuron.md)")
    p.add_argument("--world-size", type=int, default=None, metavar="N",
                   help="distributed suite: ranks per test (default 2, $TORCHCONFORM_WORLD_SIZE)")
    p.add_argument("--skiplist", action="append", default=[], metavar="PATH",
                   help="apply this skiplist YAML (repeatable; none by default), e.g. skiplists/refdev/young-backend.yaml")
    p.add_argument("--skiplist-audit", action="store_true",
                   help="run the skiplists' skip entries as xfail to find stale ones (crashes_device entries stay skipped)")
    p.add_argument("--branch", default=None,
                   help="source branch recorded with the build (default $TORCHCONFORM_BRANCH, GitHub's, or git's)")
    p.add_argument("--commit", default=None,
                   help="source commit recorded with the build (default $TORCHCONFORM_COMMIT, GitHub's, or git's)")
    p.add_argument("--trait-reruns", type=int, default=None, metavar="N",
                   help="rerun at most N failures a declared trait may explain with the trait off, to attribute "
                        "them (default 200; 0: none; docs/classification.md)")
    p.add_argument("--no-fallback", action="store_true",
                   help="strict mode: a test that ran an operator through the CPU fallback is a fail of kind "
                        "fallback_forbidden naming them; sets the profile's no_fallback_env (docs/classification.md)")
    add_json(p, help="print the breakdown as JSON")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="stream pytest's own output here as it runs (default: a progress bar here, pytest's "
                        "output in a log file beside the outcome records, its path printed)")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
