"""The side of the plugin that runs tests (an xdist worker, or the only process).

It classifies each phase where the live exception is still at hand and attaches
the result to the report as ``report.tc`` (a JSON-able dict), which xdist
serialises to the controller along with the report.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping

import pytest

from torchconform.collectors import tracking
from torchconform.core import coverage, notes, numeric, perf
from torchconform.core.classify import (
    DTYPE_PREFIX, SKIPLIST_PREFIX, Verdict, classify_exception, classify_text, exception_name, exception_text,
    refine_by_device_ops,
)
from torchconform.collectors.devicecheck import DeviceCheck
from torchconform.core.outcome import FAIL, HOST_ONLY, PASS, XFAIL, XPASS, bound_message, replace_surrogates
from torchconform.collectors.testinfo import item_info
from torchconform.collectors.traitfail import parse_mismatch
from torchconform.collectors.watchdog import STATE_ENV, Watchdog
from torchconform import settings as tc_settings
from torchconform.skiplists.entries import ref_from_message
from torchconform.collectors.session import is_xdist_worker
from torchconform.core.classify import render_chain
from torchconform.errors import UserError


def _resolve(spec: str):
    if not spec:
        return None
    import importlib
    mod, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError):
        return None


def fallback_counts(value) -> dict:
    """A profile's ``fallback_counter`` result as {operator: count}: a mapping as it is; a
    list, set or tuple of operator names (a tracking API such as
    torch_neuronx.get_fallback_ops()) counts each name once, as used."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return {str(op): 1 for op in value}
    raise TypeError(f"fallback_counter returned {type(value).__name__}, not {{operator: count}} or operator names")


def _skip_reason(report) -> str:
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        reason = str(lr[2])
        return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason
    return str(lr or "")


class WorkerPlugin:
    def __init__(self, config, settings):
        self.config = config
        self.settings = settings
        self.profile = settings.profile
        self.device = settings.device
        self.in_worker = is_xdist_worker(config)
        self.watchdog = Watchdog(settings.timeout, tc_settings.given(STATE_ENV), self.in_worker)
        self._fallback_counts = _resolve(self.profile.fallback_counter)
        self._fallback_reset = _resolve(self.profile.fallback_reset)
        self._fallback_seen: dict[str, list[str]] = {}
        # The backend's own tracking API (collectors/tracking.py), resolved at the first test
        # (the backend is loaded by then); what it reported per test, read after the call.
        self._tracking: tracking.Tracking | None = None
        self._tracking_resolved = False
        self._tracked: dict[str, tuple] = {}
        self._reset_warned = False
        self._info: dict[str, dict] = {}
        self.skiplist = None
        # Made at the first test: the xdist controller runs none, and must not import
        # torch before collection (collectors/plugin.py: is_xdist_controller).
        self._device_check: DeviceCheck | None = None
        self._touch: dict = {}       # nodeid -> devicecheck.Touch of its call
        self._memory: dict = {}      # nodeid -> devicecheck.Memory after its set-up

    def device_check(self) -> DeviceCheck:
        if self._device_check is None:
            tracked = self.tracking() is not None and self.tracking().fallback_ops is not None
            self._device_check = DeviceCheck(self.device, tracked=tracked)
        return self._device_check

    def tracking(self) -> tracking.Tracking | None:
        """The profile's tracking functions (None: the profile names none, or they could not
        be resolved, said once as a warning: the generic evidence is used then)."""
        if not self._tracking_resolved:
            self._tracking_resolved = True
            try:
                self._tracking = tracking.resolve(self.profile, self.settings.backend_module)
            except UserError as exc:
                warnings.warn(f"torchconform: {exc}; using the generic fallback evidence instead")
        return self._tracking

    # -- collection: dtype policy and the skiplist seam ---------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        self.skiplist = config.hook.pytest_torchconform_skiplist(config=config, profile=self.profile)
        unsupported = self.profile.unsupported_dtypes
        for item in items:
            info = item_info(item, self.device)
            info["test_id"] = item.nodeid
            info["path"] = str(item.path)
            self._info[item.nodeid] = info
            if info["dtype"] and info["dtype"] in unsupported:
                item.add_marker(pytest.mark.skip(
                    reason=f"{DTYPE_PREFIX} {info['dtype']} (profile {self.profile.name} dtype policy)"))
                continue
            entry = self.skiplist.match(info) if self.skiplist is not None else None
            if entry is not None:
                reason = f"{SKIPLIST_PREFIX} {entry.id} {getattr(entry, 'reason', '')}".strip()
                mode = getattr(entry, "mode", "skip")
                item.add_marker(pytest.mark.skip(reason=reason) if mode == "skip"
                                else pytest.mark.xfail(reason=reason, strict=False))

    # -- running -------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if self._fallback_reset is not None:
            self._reset(self._fallback_reset, "fallback_reset")
        notes.clear()
        numeric.clear()
        perf.clear()
        self.watchdog.arm(item.nodeid)
        try:
            return (yield)
        finally:
            self.watchdog.disarm()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        result = yield
        # The leak check's "before": after the fixtures (and setUpClass) that outlive
        # the test made what they keep, as an autouse fixture would see it.
        self._memory[item.nodeid] = self.device_check().memory()
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        before = self._memory.pop(item.nodeid, None)   # dropped unless the call passed
        result = yield
        if before is not None:
            # A leak is a teardown failure, so the test is ``error`` (controller.combine):
            # the op may compute correctly and still be unusable in a long-running job.
            leak = self.device_check().leak(before)
            if leak:
                raise AssertionError(leak)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        # Fallback warnings are evidence too (backends without a counter); they
        # are re-emitted so pytest's own warning summary still sees them.
        api = self.tracking()
        if api is not None:
            self._reset(api.reset, "tracking.clear")
        with self.device_check().watch() as touch, warnings.catch_warnings(record=True) as caught:
            self._touch[item.nodeid] = touch
            try:
                return (yield)
            finally:
                ops = []
                for w in caught:
                    ops.extend(o for o in self.profile.find_fallback_ops(str(w.message)) if o not in ops)
                self._fallback_seen[item.nodeid] = ops
                if api is not None:
                    self._tracked[item.nodeid] = self._read_tracking(api)
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    def _reset(self, reset, what: str) -> None:
        """Call the backend's own reset of its fallback evidence before a test."""
        try:
            reset()
        except Exception as exc:  # noqa: BLE001 - the backend's own function failed
            # Stale evidence would mark the next test pass_fallback wrongly: say so, once.
            if not self._reset_warned:
                self._reset_warned = True
                warnings.warn(f"torchconform: the profile's {what} failed ({exception_name(exc)}: "
                              f"{exception_text(exc)}); fallback evidence may carry over between tests")

    def _read_tracking(self, api) -> tuple:
        """(fallback operators, executed operators) the backend reported for the call
        (None each where it offers no such function or the call failed)."""
        sync = getattr(self.device_check().module, "synchronize", None)
        try:
            if callable(sync):
                sync()   # an asynchronous backend records executed operators when they run
        except Exception:  # noqa: BLE001 - the test's own failure is the verdict, not this
            pass
        try:
            return api.read()
        except Exception:  # noqa: BLE001
            return None, None

    def _evidence(self, nodeid: str, seen=None, tracked_fallback=None) -> tuple[list[str], str]:
        """(fallback operators of the call, where they came from: docs/classification.md)."""
        api = self.tracking()
        if api is not None and api.fallback_ops is not None:
            self._fallback_seen.pop(nodeid, None)
            return list(tracked_fallback or []), f"{tracking.TRACKING} {api.label('fallback_ops')}"
        ops = self._fallback_ops(nodeid, seen)
        sources = []
        if seen is not None and seen.recorded:
            sources.append(tracking.DISPATCHER)
        if self._fallback_counts is not None:
            sources.append(f"{tracking.COUNTER} {self.profile.fallback_counter}")
        sources.append(tracking.WARNING)
        return ops, " + ".join(sources)

    def _fallback_ops(self, nodeid: str, seen=None) -> list[str]:
        ops = list(self._fallback_seen.pop(nodeid, []))
        # The dispatcher's evidence: operators the backend's boxed CPU fallback served.
        for op in (seen.fallback if seen is not None else ()):
            if op not in ops:
                ops.append(op)
        if self._fallback_counts is not None:
            try:
                counts = fallback_counts(self._fallback_counts())
            except Exception:
                counts = {}
            for op, n in sorted(counts.items()):
                op = op if "::" in op else "aten::" + op
                if n and op not in ops:
                    ops.append(op)
        return sorted(ops)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        tc = {"when": report.when}
        verdict = self._phase_verdict(report, call)
        if verdict is not None:
            tc["verdict"] = verdict.to_dict()
        if report.when == "setup":
            tc["info"] = self._info.get(item.nodeid) or dict(item_info(item, self.device), test_id=item.nodeid)
        if report.when == "call":
            touch = self._touch.pop(item.nodeid, None)
            seen = touch.seen if touch is not None else None
            if verdict is not None and seen is not None:
                verdict = self._refine(verdict, report, call, seen)
                tc["verdict"] = verdict.to_dict()
            tracked = self._tracked.pop(item.nodeid, (None, None))
            tc["fallback_ops"], tc["evidence"] = self._evidence(item.nodeid, seen, tracked[0])
            touch = self._tracked_touch(touch, tracked[1], tc)
            reached = coverage.call_coverage(seen, tracked[1])   # the coverage audit (core/coverage.py)
            if reached is not None:
                tc["coverage"] = reached
            errors = numeric.take()   # the call's comparisons with the CPU reference
            if errors is not None:
                tc["errors"] = errors
            measured = perf.take()   # the perf suite's timings (torchconform/core/perf.py)
            if measured is not None:
                tc["perf"] = measured
            if verdict is not None and verdict.outcome == PASS and not tc["fallback_ops"] \
                    and touch is not None and touch.touched is False:
                tc["verdict"].update(kind=HOST_ONLY, message=verdict.message or f"{HOST_ONLY}: {touch.how}")
            if not report.passed:
                self._memory.pop(item.nodeid, None)  # a failed test's traceback still holds its tensors
            if verdict is not None and verdict.outcome == FAIL:
                # A closeness failure's statistics, for the controller's trait attribution
                # (collectors/traitfail.py); only failures pay for reading the chain.
                exc = call.excinfo.value if call.excinfo is not None else None
                mismatch = parse_mismatch(_chain_text(exc) if exc is not None else str(report.longrepr))
                if mismatch is not None:
                    tc["mismatch"] = mismatch
        report.tc = tc
        return report

    def _tracked_touch(self, touch, executed, tc: dict):
        """The device check's Touch, decided by the backend's executed operators where it
        reports them: touched when it executed or fell back on any operator, or when the
        generic check saw the device touched (an allocation alone runs no operator)."""
        api = self.tracking()
        if api is None or api.executed_ops is None or executed is None or touch is None:
            return touch
        touched = bool(executed) or bool(tc["fallback_ops"]) or touch.touched is True
        label = api.label("executed_ops")
        if not touched:
            tc["evidence"] = f"{tracking.TRACKING} {label}"
        return type(touch)(touched=touched, how=f"{label} reported no operator during the test", seen=touch.seen)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(self, config, report):
        # What xdist sends to the controller (report.tc, longrepr, captured sections):
        # execnet encodes every string as UTF-8, so one lone surrogate (an undecodable
        # byte in an assertion message) would end the whole run with an INTERNALERROR.
        data = yield
        return _without_surrogates(data)

    def _refine(self, verdict: Verdict, report, call, seen) -> Verdict:
        """Errors the device caused without naming it, named by the dispatcher observer."""
        dispatch = self.device_check().dispatch
        if dispatch is None or not seen.recorded:
            return verdict
        exc = call.excinfo.value if call.excinfo is not None else None
        text = _chain_text(exc) if exc is not None else str(report.longrepr or "")
        return refine_by_device_ops(verdict, text, self.device, seen, dispatch.served_by_fallback)

    def _phase_verdict(self, report, call) -> Verdict | None:
        exc = call.excinfo.value if call.excinfo is not None else None
        wasxfail = getattr(report, "wasxfail", None)
        if report.passed:
            if wasxfail is not None:
                # A skiplist xfail entry that passed: keep the entry, so the stale
                # expectation can be traced (and pruned) to its line.
                return Verdict(XPASS, message=bound_message(f"unexpected pass; expectation: {wasxfail}"),
                               skiplist_entry=ref_from_message(wasxfail))
            return Verdict(PASS, message=notes.take()) if report.when == "call" else None
        if report.skipped:
            if wasxfail is not None:
                text = f"{wasxfail}\n" + (_chain_text(exc) if exc is not None else "")
                v = classify_text(text, self.profile, status="xfail")
                if v.outcome == XFAIL:
                    v.message = bound_message(wasxfail) or "expected failure (unittest.expectedFailure)"
                # the expectation stays visible on the record whatever the failure became (a missing operator)
                v.skiplist_entry = getattr(v, "skiplist_entry", "") or ref_from_message(wasxfail)
                return v
            if exc is not None and not isinstance(exc, pytest.skip.Exception):
                return classify_exception(exc, self.profile, status="skipped")
            return classify_text(_skip_reason(report), self.profile, status="skipped")
        status = "failure" if report.when == "call" else "error"
        if exc is not None and not isinstance(exc, pytest.fail.Exception):
            return classify_exception(exc, self.profile, status=status)
        return classify_text(str(report.longrepr), self.profile, status=status)


def _without_surrogates(value):
    """A JSON-able value with lone surrogates written as U+FFFD in every string."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_without_surrogates(v) for v in value)
    return value


def _chain_text(exc) -> str:
    return render_chain(exc)
