"""``torchconform skiplist import|export``: torch-neuronx specs to skiplist YAML and back
(skiplists/neuron_spec_io.py; docs/neuron.md)."""
from __future__ import annotations

import sys

from torchconform.cli.options import add_device
from torchconform.errors import UserError
from torchconform.skiplists import neuron_spec_io as io


def register(sub) -> None:
    imp = sub.add_parser("import", help="convert torch-neuronx spec files (JSON) into skiplist YAML",
                         description="Convert torch-neuronx test plans (tests/pytorch_tests/specs/*.json) into "
                                     "torchconform skiplists: one entry per xfail/skip test, with its reason; the "
                                     "spec's test selection is kept in a `spec:` section for run --spec and export.")
    imp.add_argument("specs", nargs="+", metavar="SPEC", help="torch-neuronx spec file(s); list files "
                     "(test_list_filename) are read from the folder holding specs/")
    imp.add_argument("-o", "--out", metavar="FILE|FOLDER",
                     help="write here (a folder: one <spec>.yaml each; required for several specs); default stdout")
    add_device(imp, default="neuron",
               help="device the entries name classes and tests for (default neuron; refdev for a rehearsal)")
    imp.add_argument("--issue", default=None, metavar="URL",
                     help="tracking URL written into every entry (default: torch-neuronx's issue tracker)")
    imp.set_defaults(func=run_import)

    exp = sub.add_parser("export", help="write imported skiplists back as torch-neuronx spec files",
                         description="Write skiplist YAML made by `skiplist import` (and edited since) back as "
                                     "torch-neuronx specs: OUT/specs/<name>.json and OUT/failing_test_methods/*.json.")
    exp.add_argument("paths", nargs="+", metavar="PATH", help="imported skiplist YAML file(s)")
    exp.add_argument("--format", required=True, choices=("torch-neuronx-spec",), help="output format")
    exp.add_argument("-o", "--out", required=True, metavar="FOLDER", help="folder to write specs/ (and lists) into")
    exp.set_defaults(func=run_export)


def run_import(args) -> int:
    results = io.import_specs(args.specs, args.out, args.device, args.issue or io.DEFAULT_ISSUE)
    for spec, target, text in results:
        counts = spec.counts()
        if target is None:
            sys.stdout.write(text)
        print(f"{spec.path}: {counts['entries']} configurations, {counts['xfail']} xfail, {counts['skip']} skip"
              f" ({counts['folder_defaults']} folder defaults; forms: {', '.join(counts['forms']) or 'none'})"
              + (f" -> {target}" if target else ""), file=sys.stderr)
    return 0


def run_export(args) -> int:
    if args.format != "torch-neuronx-spec":
        raise UserError(f"--format {args.format}: only torch-neuronx-spec is written")
    for path, written in io.export_specs(args.paths, args.out):
        print(f"{path} -> {', '.join(written)}", file=sys.stderr)
    return 0
