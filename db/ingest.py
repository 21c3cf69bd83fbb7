"""Load JUnit XML from any runner into the store.

Parsing and classification live in ``db/junit/read.py`` (the runner's ``tc``
property taken as it is, other test cases classified by the one classifier); this
module stores what it reads.  The whole ingest is one transaction, written batch by
batch as the files are parsed: bad input anywhere rolls it back, so nothing is stored.
Big inputs are parsed in a second process while this one stores (``ParsedInChild``).
"""
from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import queue
import sys
import threading
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Iterator

from torchconform.core.profile import load_profile
from torchconform.db.junit.write import run_property_value
from torchconform.db.junit.read import JunitReader, parse_junit  # noqa: F401  (the reader's home)
from torchconform.db.values import digest
from torchconform.errors import UserError
from torchconform.gcpause import no_cyclic_gc

# Files at least this large (in all) are parsed in a second process while this one
# writes: parsing and storing cost about the same, so on two cores the ingest takes
# about half as long.  Smaller inputs are not worth a process.
PIPELINE_MIN_BYTES = 4 << 20
# The pipe between the two (see _widen): Linux's default ceiling for an unprivileged process.
PIPE_BYTES = 1 << 20


@dataclass
class Batch:
    """A parsed piece of one file, as store rows."""
    file: int                 # index of the file in the ingest's list
    suite: str
    run_properties: dict
    tests: list[tuple]        # db/store.py test_row layout
    results: list[tuple]      # Store.add_rows layout: value indexes the file's values so far
    values: list[tuple]       # what results say, first said in this batch (repro None: the template's)
    digests: list[int]        # the values' digests (db/values.py), made on the parsing side
    last: bool                # the file's final batch
    repro_template: str       # the file's (JunitReader.repro_template)


def ingest(store, paths: list[str], build: str, suite: str | None = None, append: bool = False,
           profile=None, command: str = "", host: str = "", allow_empty: bool = False) -> dict:
    """Store JUnit files as one build (one run per file) in one transaction.

    Files are streamed in batches inside that transaction; any bad input
    raises UserError and rolls everything back, so nothing is stored.  A file
    with no test cases is bad input unless ``allow_empty`` (an empty build would
    look like a complete one that ran nothing).
    """
    if not paths:
        raise UserError("no files to ingest; pass one or more JUnit XML paths")
    if isinstance(profile, str):
        profile = load_profile(profile)
    readers = [JunitReader(p, suite=suite, profile=profile) for p in paths]  # missing files fail first
    big = sum(os.path.getsize(p) for p in paths) >= PIPELINE_MIN_BYTES
    batches = ParsedInChild(readers) if big and _can_fork() else parsed_here(readers)
    total = 0
    try:
        with store.write(bulk=True) as conn, no_cyclic_gc():
            store.ensure_build(build, append=append, conn=conn)
            meta: dict = {}
            run_id = None
            per_file: dict[int, int] = {}
            value_ids: dict[int, list[int]] = {}   # per file: its values' ids, in the order it said them
            for batch in merged(batches, store.rows_per_write):
                if run_id is None:
                    run_id = _start(store, conn, build, paths[batch.file], batch, host, command)
                ids = value_ids.setdefault(batch.file, [])
                ids += store.add_values(run_id, batch.values, conn=conn, digests=batch.digests)
                stored = store.add_rows(run_id, batch.tests, batch.results, ids, conn=conn)
                total += stored
                per_file[batch.file] = per_file.get(batch.file, 0) + stored
                if batch.last and not per_file[batch.file] and not allow_empty:
                    raise UserError(f"{paths[batch.file]}: no test cases; ingest a report that ran tests, or pass "
                                    "--allow-empty to store an empty run")
                if batch.last:
                    store.finish_run(run_id, 0, conn=conn)
                    run_id = None
                    for key, value in batch.run_properties.items():
                        if key not in ("build", "suite", "selection", "shard"):
                            meta.setdefault(key, run_property_value(key, value))
            if meta:
                store.ensure_build(build, append=True, conn=conn, **meta)
    finally:
        batches.close()  # stops a parsing process still running (an error on this side)
    return {"build": build, "files": len(readers), "outcomes": total}


def merged(batches: Iterator[Batch], rows: int) -> Iterator[Batch]:
    """``batches`` with consecutive ones of a file joined until each holds at least
    ``rows`` test cases (or ends its file): one write per that many rows."""
    pending = None
    for batch in batches:
        if pending is None or pending.file != batch.file:
            pending = batch
        else:
            pending.tests += batch.tests
            pending.results += batch.results
            pending.values += batch.values   # in the order said: results index the file's values so far
            pending.digests += batch.digests
            pending.suite, pending.run_properties, pending.last = batch.suite, batch.run_properties, batch.last
        if pending.last or len(pending.tests) >= rows:
            yield pending
            pending = None


def _start(store, conn, build, path, batch, host, command) -> int:
    props = batch.run_properties
    return store.start_run(build, suite=batch.suite, selection=props.get("selection") or path,
                           shard=props.get("shard", ""), host=host, command=command,
                           repro_template=batch.repro_template, conn=conn)


def parsed_here(readers: list[JunitReader]) -> Iterator[Batch]:
    """Every file's test cases as batches of store rows, parsed in this process: one
    batch per piece of the file parsed (db/junit/parse.py: pieces grow from 32 KiB to
    1 MiB, about 4,000 test cases, so the storing side starts soon and then keeps busy),
    and after a file's last piece an empty batch that says so."""
    for index, reader in enumerate(readers):
        for tests, results, values in reader.record_chunks(compact_repro=True):
            # In test id order (stable: a test's attempts keep theirs), as the store inserts
            # them: its sorts then find the work done, on the side that has time for it.
            pairs = sorted(zip(tests, results), key=_test_id_of_pair)
            yield Batch(index, reader.suite, dict(reader.run_properties), [p[0] for p in pairs],
                        [p[1] for p in pairs], values, [digest(v) for v in values], False, reader.repro_template or "")
        yield Batch(index, reader.suite, dict(reader.run_properties), [], [], [], [], True,
                    reader.repro_template or "")


def _test_id_of_pair(pair: tuple) -> str:
    return pair[0][0]


def _can_fork() -> bool:
    # fork: the child inherits the readers (and their profile) without pickling them;
    # only Linux forks safely after threads/libraries are loaded.
    return sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1


class ParsedInChild:
    """``parsed_here`` run in a forked process, started at once (so it parses while the
    caller opens its transaction); iterating yields its batches as they arrive over a
    pipe, while this process stores the previous ones.  A UserError in the child (bad
    XML, bad properties) is raised here with the same message.  ``close`` stops the
    child early (an error on the storing side)."""

    def __init__(self, readers: list[JunitReader]):
        ctx = multiprocessing.get_context("fork")
        self._receive, send = ctx.Pipe(duplex=False)
        _widen(send)
        self._child = ctx.Process(target=_child_main, args=(readers, send), daemon=True,
                                  name="torchconform-ingest-parser")
        self._child.start()
        send.close()

    def __iter__(self) -> Iterator[Batch]:
        while True:
            try:
                kind, payload = self._receive.recv()
            except (EOFError, OSError):   # OSError: it died halfway through a message
                self._child.join()
                code = self._child.exitcode
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                raise UserError(f"the ingest parsing process died ({how}) before sending every test case; "
                                "nothing was stored: run the ingest again (if it was killed for memory, "
                                "ingest fewer files at a time)") from None
            if kind == "batch":
                yield payload
            elif kind == "done":
                return
            elif kind == "user_error":
                raise UserError(payload)
            else:
                raise RuntimeError(f"the ingest parsing process failed:\n{payload}")

    def close(self) -> None:
        self._receive.close()
        if self._child.is_alive():
            self._child.kill()
        self._child.join()


def _widen(connection) -> None:
    # A pipe holds 64 KiB by default, so the parsing process would wait in send() for
    # this one to read each batch (about 1 MB) while it still stores the previous one.
    # Room for a whole batch lets it go on parsing.  Only a hint: elsewhere than Linux,
    # or past the system's ceiling, the pipe keeps its size and ingest works the same.
    with contextlib.suppress(ImportError, AttributeError, OSError):
        import fcntl

        fcntl.fcntl(connection.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def _child_main(readers, send) -> None:
    # Short-lived and cycle-free: the collector would only walk the heap inherited
    # from the parent (touching, and so copying, its pages) for nothing.
    gc.disable()
    # Batches go out from a thread, so parsing never waits for the storing side to read
    # (it runs ahead by as many batches as it likes: the file's rows, pickled, are a
    # fraction of the file).  The thread waits in write(), without the GIL.
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    sender = threading.Thread(target=_send_all, args=(outbox, send), daemon=True)
    sender.start()
    def post(kind: str, payload) -> None:
        outbox.put(ForkingPickler.dumps((kind, payload)))

    try:
        for batch in parsed_here(readers):
            post("batch", batch)
        post("done", None)
    except UserError as exc:
        post("user_error", str(exc))
    except BaseException:
        post("crash", traceback.format_exc())
    finally:
        outbox.put(None)
        sender.join()
        send.close()


def _send_all(outbox: queue.SimpleQueue, send) -> None:
    while (message := outbox.get()) is not None:
        try:
            send.send_bytes(message)
        except OSError:
            return  # the storing side stopped (its own error); nothing left to tell it
