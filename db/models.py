"""The store's schema: builds, runs, tests (deduplicated identity) and results.

Results carry ``build_id`` as well as ``run_id`` (denormalised on purpose): every
read query is "the latest result per test in one build", and having the build
on the row lets one composite index answer it without touching ``runs``.

The tables are declared once here; Alembic migrations under ``migrations/``
create them, and ``HEAD_REVISION`` names the revision this code expects.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON, BigInteger, DateTime, Float, ForeignKey, ForeignKeyConstraint, Index, Integer, String, Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# The schema revision this version of the tool reads and writes.
HEAD_REVISION = "0014_perf_variant"

# Run states (``runs.status``).  A build is complete when every run is FINISHED or
# RESUMED (an interrupted run whose remaining tests a later run of the build covered).
RUNNING, FINISHED, INTERRUPTED, RESUMED = "running", "finished", "interrupted", "resumed"
# Shown, never stored: a RUNNING run on this host whose process is gone (kill -9).
LOST = "lost"
DONE_STATES = (FINISHED, RESUMED)
# pytest's exit statuses of a run that ran what it planned: OK, TESTS_FAILED, NO_TESTS_COLLECTED.
FINISHED_EXIT_STATUSES = (0, 1, 5)


def status_for_exit(exit_status: int) -> str:
    """The state a run ends in for pytest's exit status (signals as negative numbers)."""
    return FINISHED if int(exit_status) in FINISHED_EXIT_STATUSES else INTERRUPTED


# BigInteger primary keys on PostgreSQL, INTEGER (rowid alias) on SQLite.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass


class Build(Base):
    __tablename__ = "builds"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    created: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    torch_version: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    torch_git: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    backend: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    backend_version: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    device: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    profile: Mapped[str] = mapped_column(String(200), default="", nullable=False)
    branch: Mapped[str] = mapped_column(String(200), default="", nullable=False)
    commit: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    extra: Mapped[dict] = mapped_column("metadata", JSON, default=dict, nullable=False)


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    build_id: Mapped[int] = mapped_column(ForeignKey("builds.id", ondelete="CASCADE"), nullable=False, index=True)
    suite: Mapped[str] = mapped_column(String(200), default="", nullable=False)
    selection: Mapped[str] = mapped_column(Text, default="", nullable=False)
    shard: Mapped[str] = mapped_column(String(50), default="", nullable=False)
    host: Mapped[str] = mapped_column(String(200), default="", nullable=False)
    command: Mapped[str] = mapped_column(Text, default="", nullable=False)
    started: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    ended: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    # NULL until finish_run: a run that was killed stays visibly incomplete.
    exit_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    n_results: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    # The run's repro command with {id} and {op} for the test's id and op
    # (torchconform/core/outcome.py: repro_template); "" when its results hold their own.
    repro_template: Mapped[str] = mapped_column(Text, default="", nullable=False, server_default="")
    status: Mapped[str] = mapped_column(String(20), default=RUNNING, nullable=False, server_default=RUNNING)
    # The process that writes the run (the pytest controller, the sweep driver), on ``host``.
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Tests the run set out to run (NULL: not known, e.g. ingest).
    planned: Mapped[int | None] = mapped_column(Integer, nullable=True)


class BuildLock(Base):
    """A live sweep writing a build: one row per holder (``sweep SUITE I/N``), so that two
    sweeps of overlapping tests never both write (db/locks.py)."""
    __tablename__ = "build_locks"

    build_id: Mapped[int] = mapped_column(ForeignKey("builds.id", ondelete="CASCADE"), primary_key=True)
    holder: Mapped[str] = mapped_column(String(300), primary_key=True)
    host: Mapped[str] = mapped_column(String(200), nullable=False)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    token: Mapped[str] = mapped_column(String(64), nullable=False)
    acquired: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    heartbeat: Mapped[datetime] = mapped_column(DateTime, nullable=False)


class Test(Base):
    __tablename__ = "tests"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    test_id: Mapped[str] = mapped_column(Text, unique=True, nullable=False)
    suite: Mapped[str] = mapped_column(String(200), default="", nullable=False)
    file: Mapped[str] = mapped_column(Text, default="", nullable=False)
    cls: Mapped[str] = mapped_column(String(500), default="", nullable=False)
    name: Mapped[str] = mapped_column(Text, default="", nullable=False)
    op: Mapped[str] = mapped_column(String(300), default="", nullable=False)
    variant: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    dtype: Mapped[str] = mapped_column(String(100), default="", nullable=False)


class ResultValue(Base):
    """What results say, stored once (db/values.py): results point here by ``value_id``."""
    __tablename__ = "result_values"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    # A 64-bit digest of the fields below (db/values.digest): how a writer finds a value.
    digest: Mapped[int] = mapped_column(BigInteger, unique=True, nullable=False)
    outcome: Mapped[str] = mapped_column(String(20), nullable=False)
    kind: Mapped[str] = mapped_column(String(30), default="", nullable=False)
    missing_op: Mapped[str] = mapped_column(String(300), default="", nullable=False)
    # Space-separated operator overloads (they never contain spaces).
    fallback_ops: Mapped[str] = mapped_column(Text, default="", nullable=False)
    skiplist_entry: Mapped[str] = mapped_column(String(300), default="", nullable=False)
    device: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    message: Mapped[str] = mapped_column(Text, default="", nullable=False)
    # NULL: the run's repro_template rendered for the result's test (what most results hold).
    repro: Mapped[str | None] = mapped_column(Text, default="", nullable=True)
    # The tightest tolerance tier a comparison test met (core.numeric.TIERS); "": none recorded.
    tier: Mapped[str] = mapped_column(String(10), default="", nullable=False, server_default="")


class Result(Base):
    """One result of one test in one run: its test, attempt, duration and errors, and what it
    said (``value_id``).  About 24 bytes a row on SQLite; see db/values.py."""
    __tablename__ = "results"
    # The references are declared on SQLite only.  PostgreSQL checks a foreign key with a
    # trigger per inserted row: the four made a bulk COPY of 154k results take 4.5 s instead
    # of 0.3 s (migration 0009_results_unchecked_pg).  The store writes only ids it created or
    # read in the same transaction (SQLite's bulk writes skip the check for that reason too),
    # and no build, run, test or value that results point at is ever deleted.
    __table_args__ = tuple(ForeignKeyConstraint([column], [target], ondelete=ondelete,
                                                info={"only_on": "sqlite"}).ddl_if(dialect="sqlite")
                           for column, target, ondelete in (("build_id", "builds.id", "CASCADE"),
                                                            ("run_id", "runs.id", "CASCADE"),
                                                            ("test_pk", "tests.id", None),
                                                            ("value_id", "result_values.id", None)))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    build_id: Mapped[int] = mapped_column(BigId, nullable=False)
    run_id: Mapped[int] = mapped_column(BigId, nullable=False)
    test_pk: Mapped[int] = mapped_column(BigId, nullable=False)
    attempt: Mapped[int] = mapped_column(Integer, default=1, nullable=False)
    value_id: Mapped[int] = mapped_column(BigId, nullable=False)
    # Whole microseconds (read back as seconds: db/values.DURATION).
    duration_us: Mapped[int] = mapped_column(BigInteger, default=0, nullable=False)
    # The largest absolute / relative error against the CPU reference (torchconform/core/numeric.py);
    # NULL: the test compared nothing (or was stored before 0007_numeric_errors).
    max_abs_err: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_rel_err: Mapped[float | None] = mapped_column(Float, nullable=True)


class BuildValue(Base):
    """The values a build's results point at (any attempt): which builds ever said what,
    without reading their results (the first build that reported an operator missing)."""
    __tablename__ = "build_values"

    build_id: Mapped[int] = mapped_column(ForeignKey("builds.id", ondelete="CASCADE"), primary_key=True)
    value_id: Mapped[int] = mapped_column(ForeignKey("result_values.id"), primary_key=True)


# "Latest result per test in a build" = max(id) grouped by (build_id, test_pk): an
# index-only scan (SQLite keeps the rowid in every index entry; PostgreSQL gets id as an
# included column).  A test's history reads it too, with ``build_id IN (every build)``.
# Every index on results costs ingest time and bytes per row, so there is only this one.
Index("ix_results_build_test", Result.build_id, Result.test_pk, postgresql_include=["id"])
Index("ix_builds_created", Build.created)
Index("ix_builds_branch_device", Build.branch, Build.device, Build.created)

builds = Build.__table__
runs = Run.__table__
tests = Test.__table__
results = Result.__table__
result_values = ResultValue.__table__
build_values = BuildValue.__table__
build_locks = BuildLock.__table__


class CensusOp(Base):
    """One operator overload's status on a build's device (torchconform.census): what the
    dispatcher serves it with, and for composites what the decomposition reaches."""
    __tablename__ = "census_ops"

    build_id: Mapped[int] = mapped_column(ForeignKey("builds.id", ondelete="CASCADE"), primary_key=True)
    op: Mapped[str] = mapped_column(String(300), primary_key=True)
    status: Mapped[str] = mapped_column(String(20), nullable=False)
    via: Mapped[str] = mapped_column(String(60), default="", nullable=False)
    # Space-separated overloads (they never contain spaces); NULL: not traced.
    reached: Mapped[str | None] = mapped_column(Text, nullable=True)
    # 1 / 0 / NULL (unknown): every reached operator runs on the device.
    covered: Mapped[int | None] = mapped_column(Integer, nullable=True)
    blocked_by: Mapped[str] = mapped_column(Text, default="", nullable=False)


census_ops = CensusOp.__table__


class ModelOp(Base):
    """The ATen overloads one model's variant (eval, train, compile) reaches, traced on CPU
    (torchconform.census.models).  Keyed by versions, not builds: the set depends on the
    model's code (torch, and transformers/torchvision for zoo models), not on the device,
    so one trace serves every build made with the same versions."""
    __tablename__ = "model_ops"

    model_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    variant: Mapped[str] = mapped_column(String(20), primary_key=True)
    torch_version: Mapped[str] = mapped_column(String(60), primary_key=True)
    # transformers' version for hf/ models, torchvision's for vision/, "" for user files
    library_version: Mapped[str] = mapped_column(String(60), primary_key=True)
    # Space-separated sorted overloads (aten::name.overload; they never contain spaces).
    ops: Mapped[str] = mapped_column(Text, nullable=False)
    traced: Mapped[datetime] = mapped_column(DateTime, nullable=False)


model_ops = ModelOp.__table__


class PerfResult(Base):
    """One timed operator x dtype x direction of a build's perf suite run (torchconform/core/perf.py):
    the first call and the warm minimum / median / maximum, on the device and on CPU, measured
    in the same test.  A rerun of the same build adds rows; readers keep the latest (max id)
    per (op, dtype, direction, variant)."""
    __tablename__ = "perf_results"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    build_id: Mapped[int] = mapped_column(ForeignKey("builds.id", ondelete="CASCADE"), nullable=False)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)
    op: Mapped[str] = mapped_column(String(300), nullable=False)
    dtype: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    direction: Mapped[str] = mapped_column(String(20), nullable=False)
    # eager, or compiled (torch.compile of the same call; its first call includes the compile)
    variant: Mapped[str] = mapped_column(String(20), default="eager", nullable=False, server_default="eager")
    sample: Mapped[str] = mapped_column(String(300), default="", nullable=False)
    calls: Mapped[int] = mapped_column(Integer, nullable=False)
    dev_first: Mapped[float | None] = mapped_column(Float, nullable=True)
    dev_min: Mapped[float | None] = mapped_column(Float, nullable=True)
    dev_median: Mapped[float | None] = mapped_column(Float, nullable=True)
    dev_max: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu_first: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu_min: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu_median: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu_max: Mapped[float | None] = mapped_column(Float, nullable=True)


Index("ix_perf_results_build_op", PerfResult.build_id, PerfResult.op)

perf_results = PerfResult.__table__


class OpCoverage(Base):
    """The coverage audit: one ATen overload that a run's tests reached on the device, with
    how many tests reached it and one of them (db/coverage.py).  A build's coverage is the
    union over its runs."""
    __tablename__ = "op_coverage"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    op: Mapped[str] = mapped_column(String(300), primary_key=True)
    build_id: Mapped[int] = mapped_column(ForeignKey("builds.id", ondelete="CASCADE"), nullable=False)
    tests: Mapped[int] = mapped_column(Integer, nullable=False)
    example_test: Mapped[str] = mapped_column(Text, default="", nullable=False, server_default="")


Index("ix_op_coverage_build_op", OpCoverage.build_id, OpCoverage.op)

op_coverage = OpCoverage.__table__


class NotRun(Base):
    """Not-run accounting: per run, how many tests its selection left out for one reason
    (db/not_run.py; torchconform/core/not_run.py).  Never results: the denominator's other side."""
    __tablename__ = "not_run"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    reason: Mapped[str] = mapped_column(String(40), primary_key=True)
    build_id: Mapped[int] = mapped_column(ForeignKey("builds.id", ondelete="CASCADE"), nullable=False)
    tests: Mapped[int] = mapped_column(Integer, nullable=False)
    detail: Mapped[str] = mapped_column(Text, default="", nullable=False, server_default="")
    example_test: Mapped[str] = mapped_column(Text, default="", nullable=False, server_default="")


Index("ix_not_run_build", NotRun.build_id)

not_run = NotRun.__table__
