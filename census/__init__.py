"""The operator census: every ATen overload's status on a device, stored per build.

    from torchconform.census import take_census
    census = take_census("refdev")          # rows: op, status, via, reached, covered

Statuses (dispatch.STATUSES): native, autograd, composite, fallback, missing and
unavailable (no dense kernel on any backend of this torch build: not the device's gap).
Modules: dispatch (statuses from the dispatcher), trace (what composites reach),
take (device set-up + census), records (store), diff (builds compared, gate rule),
plan (which operators to implement first), models (per-model operator sets and
what blocks each model), modeltrace (how the models suite records those sets).
"""
from torchconform.core.dispatch import STATUSES, Row  # noqa: F401
from torchconform.census.take import Census, take_census  # noqa: F401
