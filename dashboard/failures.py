"""Why a build's tests failed: their messages and repro commands, as lazily loaded data files.

Every failed, errored, crashed, timed-out and backend-skipped test of a build
goes into ``data/failures/<slug>/``, read by the build page's failure list
(static/failures.js, every chunk) and a test's history (static/search.js, the
one chunk that holds the test, of each build it failed in).  Each file is a
``TC.loaded(key, ...)`` script loaded by ``<script>`` injection, which works on
file://.

The rows name no test: row k is the test at the k-th position whose code in the
build's search data (``data/builds/<slug>.js``) is a failure code
(``search.failure_codes``), positions counted as in ``data/tests.js``
(dashboard/positions.py), so a test id is not written again per build.  The columns
are base-64 digit strings (dashboard/encoding.py): about seven characters a row.

``index.js`` (key ``failures:<slug>``): ``codes`` (the failure codes), ``tests`` (rows in all), ``chunk`` (rows per
chunk), ``chunks``, ``labels``, ``messages`` (those of several chunks), ``ops``,
``repros`` (each distinct command as parts: text, 0 for the test's id, 1 for its
operator; a run's commands differ only there: torchconform/core/outcome.py ``repro_template``),
``clusters`` (signatures).
``<k>.js`` (key ``failures:<slug>:<k>``, rows ``k * chunk`` on): ``messages`` (its
messages no other chunk has) and one column each (``{"width", "codes"}``) of
``label``, ``message`` (``i`` < len(index messages): the index's, else the chunk's
``i - len``), ``repro``, ``op`` (indices into the lists above) and ``cluster`` (its
failure cluster plus one; 0 for a backend skip).

The failure clusters (torchconform/core/clusters.py) come out of the same pass.
"""
from __future__ import annotations

import numpy as np

from torchconform.core.clusters import Clusterer, Failure
from torchconform.core.outcome import (
    FAILED, SKIP_BACKEND, fits_template, render_repro, repro_command, repro_parts, repro_template,
)
from torchconform.db.arrays import RUN_AT, STORED_REPRO_AT
from torchconform.dashboard.encoding import Numbered, column
from torchconform.dashboard.pages.search import failure_codes
from torchconform.db.arrays import CODES

SHOWN = FAILED | {SKIP_BACKEND}
CHUNK = 4000    # rows per chunk file: a test's history loads one chunk of each build it failed in
COLUMNS = ("label", "message", "repro", "op", "cluster")


def failure_data(data, build: str, device: str = "", categories=(), positions=None) -> tuple[dict, list[dict], list]:
    """(the index and the chunks of the build's failure data, its clusters largest first)
    from a arrays.BuildData read with its ``repro`` column (arrays.FAILURE_COLUMNS).
    ``positions``: the site's numbering (positions.Positions); rows go in its order, and a
    test it does not number (stored after it was made) is left out."""
    tests, pairs = data.tests, CODES.pairs
    shown = np.fromiter((o in SHOWN for o, _ in pairs), dtype=bool, count=len(pairs))
    at = np.flatnonzero(shown[data.code])
    if positions is None:   # no site around it (the gate's clusters, tests): test id order
        where = tests.id_rank[data.pk[at]]
    else:
        where = positions.of(data.pk[at])
        at, where = at[where >= 0], where[where >= 0]
    at = at[np.argsort(where, kind="stable")]
    pks, codes = data.pk[at], data.code[at]
    used, label = np.unique(codes, return_inverse=True)
    labels = [f"{o}/{k}" if k else o for o, k in map(pairs.__getitem__, used.tolist())]
    used, op = np.unique(tests.index["op"][pks], return_inverse=True)
    ops = [tests.levels["op"][u] if u >= 0 else "" for u in used.tolist()]
    rows = data.rows.take(at)
    pk_list = pks.tolist()
    repro, repros, commands = _repro_column(tests, pk_list, rows, device, data.templates)
    failed = np.fromiter((o in FAILED for o, _ in pairs), dtype=bool, count=len(pairs))[codes]
    cluster, clusters = _cluster_column(tests, pk_list, rows, failed, commands, categories)
    flat = {"label": (label, len(labels) - 1), "repro": (repro, len(repros) - 1), "op": (op, len(ops) - 1),
            "cluster": (cluster + 1, len(clusters))}
    chunks, messages = _chunks(rows, flat)
    index = {"build": build, "codes": failure_codes(), "tests": len(at), "chunk": CHUNK, "chunks": len(chunks), "labels": labels,
             "messages": messages, "repros": repros, "ops": ops, "clusters": [c.signature for c in clusters]}
    return index, chunks, clusters


def _repro_column(tests, pk_list, rows, device, run_templates) -> tuple[np.ndarray, list, "_Commands"]:
    """(each row's index in the distinct commands, those commands as parts, each row's command).

    A row without a stored command has its run's template (``run_templates``): used as it
    is, rendered only for the rows whose command is asked for (the clusters' examples).
    A stored command is turned back into a template where it is one (most of a run's are)."""
    test_id, op_of = tests.values["test_id"], tests.values["op"]
    templates, literals = Numbered(), Numbered()
    at, stored, last = [], {}, None
    for k, (pk, r) in enumerate(zip(pk_list, rows)):
        tid, op = test_id[pk], op_of[pk]
        repro = r[STORED_REPRO_AT]
        if not repro:
            template = run_templates.get(r[RUN_AT]) or ""
            if template and op is not None:
                at.append(templates[template])
                continue
            repro = repro_command("", tid, device)   # what the gate's report shows there
        stored[k] = repro
        op = op or ""
        if last is None or not fits_template(last, repro, tid, op):
            last = repro_template(repro, tid, op) or None
        # a template is one entry for many tests; a command that is no template is its own (~n: after them)
        at.append(templates[last] if last is not None else ~literals[repro])
    numbers = np.array(at, dtype=np.int64)
    numbers[numbers < 0] = len(templates.values) + ~numbers[numbers < 0]
    commands = _Commands(stored, numbers, templates.values, test_id, op_of, pk_list)
    return numbers, [repro_parts(t) for t in templates.values] + [[text] for text in literals.values], commands


class _Commands:
    """Row k's repro command, made when asked: its stored text, or its template rendered."""

    def __init__(self, stored, column, templates, test_id, op_of, pk_list):
        self.stored, self.column, self.templates = stored, column, templates
        self.test_id, self.op_of, self.pk_list = test_id, op_of, pk_list

    def __getitem__(self, k: int) -> str:
        if k in self.stored:
            return self.stored[k]
        pk = self.pk_list[k]
        return render_repro(self.templates[int(self.column[k])], self.test_id[pk], self.op_of[pk] or "")


def _cluster_column(tests, pk_list, rows, failed, commands, categories) -> tuple[np.ndarray, list]:
    """(each row's cluster, -1 for a backend skip; the clusters largest first) of the ``failed`` rows."""
    test_id, name, op, dtype = (tests.values[c] for c in ("test_id", "name", "op", "dtype"))
    clusterer = Clusterer(categories)
    numbers = np.full(len(rows), -1, dtype=np.int64)
    for k in np.flatnonzero(failed).tolist():
        pk, r = pk_list[k], rows[k]
        numbers[k] = clusterer.add(Failure(test_id[pk], r[1], r[5] or "", commands[k], name[pk] or "", op[pk] or "",
                                           dtype[pk] or ""))
    clusters, rank = clusterer.ranked()
    if rank:
        numbers[failed] = np.asarray(rank, dtype=np.int64)[numbers[failed]]
    return numbers, clusters


def cluster_keys(data, categories=()) -> set[str]:
    """The keys of a build's failure clusters from its results alone (arrays.RESULT_COLUMNS,
    no repro commands): what ``core.clusters.order`` needs of a baseline whose own
    pages are not rendered (past ``--full-builds``)."""
    tests, pairs = data.tests, CODES.pairs
    failed = np.fromiter((o in FAILED for o, _ in pairs), dtype=bool, count=len(pairs))
    test_id, name, op, dtype = (tests.values[c] for c in ("test_id", "name", "op", "dtype"))
    clusterer = Clusterer(categories)
    for r in data.rows.take(np.flatnonzero(failed[data.code])):
        pk = r[0]
        clusterer.add(Failure(test_id[pk], r[1], r[5] or "", "", name[pk] or "", op[pk] or "", dtype[pk] or ""))
    return {c.key for c in clusterer.clusters}


def _chunks(rows, flat: dict) -> tuple[list[dict], list[str]]:
    """(the chunk files, the messages of several chunks) from the columns ``flat``
    ({name: (numbers, largest)}): a message in several chunks is the index's, any other its
    chunk's (numbered after the index's)."""
    messages = Numbered()
    message = np.fromiter(map(messages.__getitem__, [r[5] or "" for r in rows]), dtype=np.int64, count=len(rows))
    n = len(messages.values)
    in_chunks = np.bincount(np.unique(np.arange(len(rows)) // CHUNK * n + message) % max(n, 1), minlength=n)
    shared = np.flatnonzero(in_chunks > 1)
    rank = np.full(n, -1, dtype=np.int64)
    rank[shared] = np.arange(len(shared))
    chunks = []
    for start in range(0, len(rows), CHUNK):
        end = start + CHUNK
        m = rank[message[start:end]]
        own, local = np.unique(message[start:end][m < 0], return_inverse=True)
        m[m < 0] = len(shared) + local
        chunk = {"messages": [messages.values[i] for i in own.tolist()],
                 "message": column(m, len(shared) + len(own) - 1)}
        for name, (numbers, largest) in flat.items():
            chunk[name] = column(numbers[start:end], largest)
        chunks.append(chunk)
    return chunks, [messages.values[i] for i in shared.tolist()]


def render(site, build, data, categories=(), positions=None) -> tuple[dict, list]:
    """Write ``build``'s failure data (model.BuildInfo; ``data``: its BuildData; ``positions``:
    the site's numbering); returns ({"failed", "skipped", "clusters"} counts for its page, its
    clusters largest first)."""
    index, chunks, clusters = failure_data(data, build.name, build.device, categories, positions)
    base = f"data/failures/{build.slug}/"
    site.write_data(base + "index.js", f"failures:{build.slug}", index)
    for k, chunk in enumerate(chunks):
        site.write_data(f"{base}{k}.js", f"failures:{build.slug}:{k}", chunk)
    failed = sum(c.tests for c in clusters)
    return {"failed": failed, "skipped": index["tests"] - failed, "clusters": len(clusters)}, clusters
