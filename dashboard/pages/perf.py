"""A build's per-operator performance page (``builds/<slug>/perf.html``), for builds that ran
the perf suite (docs/perf.md):

- every timed operator x dtype x direction x variant (eager, or compiled: its first call
  includes the compile; compared only with the baseline's same variant): first call and warm min / median / max on the
  device and on CPU, the device/CPU ratio, and against the baseline its ratio, change and
  verdict (torchconform/core/perf.py, what the gate's ``perf_regression`` judges); sortable, with
  JSON and CSV downloads;
- the device/CPU ratio as a bar chart (log scale), slowest relative to CPU first;
- each operator's ratio across the build's series up to it (db/perf.history).

Everything a test or a store supplied is escaped: table cells by the table macro, chart
labels here.
"""
from __future__ import annotations

import math

from markupsafe import Markup, escape

from torchconform.core import perf
from torchconform.dashboard.tables import Table
from torchconform.db import perf as perf_db

ROWS_SHOWN = 200
CHART_BARS = 40


def has_perf(store, build_name: str) -> bool:
    return perf_db.has_rows(store, build_name)


def perf_table(stem: str, rows: list[dict], changes: list[dict] | None) -> Table:
    columns = ["op", "dtype", "direction", "variant", "sample", "calls", "device first s", "device min s", "device median s",
               "device max s", "CPU first s", "CPU min s", "CPU median s", "CPU max s", "device/CPU"]
    if changes is not None:
        columns += ["baseline device/CPU", "change", "spread", "verdict"]
    t = Table(stem, columns, title="Per-operator timings (device and CPU in the same run)")
    by_key = {(c["op"], c["dtype"], c["direction"], c["variant"]): c for c in changes or ()}
    for r in perf.slowest(rows):
        row = [r["op"], r["dtype"], r["direction"], r["variant"], r["sample"], r["calls"], *(r[f] for f in perf.FIGURES),
               _round(r["ratio"])]
        if changes is not None:
            c = by_key.get(perf.key(r))
            row += [_round(c["old_ratio"]), _round(c["change"]), _round(c["spread"]), c["verdict"]] if c \
                else [None, None, None, "new"]
            if c and c["verdict"] == "regression":
                t.classes.setdefault("verdict", {})[len(t.rows)] = "failed"
        t.rows.append(row)
    return t


def history_table(stem: str, history: dict, builds: list[str]) -> Table:
    """One row per operator x dtype x direction x variant: its device/CPU ratio in each build of the series."""
    t = Table(stem, ["op", "dtype", "direction", "variant", "builds", "first ratio", "latest ratio", "ratios (oldest first)"],
              title=f"History across the series ({len(builds)} builds with perf results)")
    for (op, dtype, direction, variant), points in sorted(history.items()):
        ratios = [p["ratio"] for p in points]
        t.rows.append([op, dtype, direction, variant, len(points), _round(ratios[0]), _round(ratios[-1]),
                       " ".join("-" if q is None else f"{q:.3g}" for q in ratios)])
    return t


def _round(value):
    return None if value is None else round(value, 4)


def ratio_chart(rows: list[dict], bars: int = CHART_BARS, width: int = 900) -> Markup:
    """Horizontal bars of the device/CPU ratio (log scale, 1x marked), slowest first."""
    shown = [r for r in perf.slowest(rows) if r["ratio"]][:bars]
    if not shown:
        return Markup('<p class="empty">No ratio to draw.</p>')
    label_w, bar_h, gap = 260, 14, 4
    logs = [math.log10(r["ratio"]) for r in shown]
    lo, hi = min(0.0, min(logs)), max(0.0, max(logs))
    span = (hi - lo) or 1.0
    plot_w = width - label_w - 70

    def x(v: float) -> float:
        return label_w + (v - lo) / span * plot_w

    height = len(shown) * (bar_h + gap) + 24
    parts = [f'<svg class="chart perf-ratio" viewBox="0 0 {width} {height}" width="100%" role="img" '
             f'aria-label="device/CPU ratio per operator, slowest relative to CPU first">']
    one = x(0.0)
    for i, (r, v) in enumerate(zip(shown, logs)):
        y = 4 + i * (bar_h + gap)
        left, right = sorted((one, x(v)))
        label = escape(f"{r['op']} {r['dtype']} {r['direction']}"
                       + ("" if r.get("variant", perf.EAGER) == perf.EAGER else f" {r['variant']}"))
        parts.append(f'<text x="{label_w - 6}" y="{y + bar_h - 3}" text-anchor="end" font-size="11">{label}</text>')
        parts.append(f'<rect x="{left:.1f}" y="{y}" width="{max(right - left, 1):.1f}" height="{bar_h}" '
                     f'class="{"c-fail" if v > 0 else "c-pass"}"><title>{label}: {r["ratio"]:.3g}x</title></rect>')
        parts.append(f'<text x="{max(right, left) + 4:.1f}" y="{y + bar_h - 3}" font-size="11">{r["ratio"]:.3g}x</text>')
    parts.append(f'<line x1="{one:.1f}" x2="{one:.1f}" y1="0" y2="{height - 18}" stroke="currentColor"/>')
    parts.append(f'<text x="{one:.1f}" y="{height - 4}" text-anchor="middle" font-size="11">1x (as fast as CPU)</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def render(site, store, build, generated: str) -> bool:
    """Write ``builds/<slug>/perf.html`` when the build has perf results; returns whether it did."""
    if not perf_db.has_rows(store, build.name):
        return False
    base = f"builds/{build.slug}/"
    rows = perf_db.build_rows(store, build.name)
    baseline = build.baseline.name if build.baseline is not None else None
    changes = None
    if baseline is not None and perf_db.has_rows(store, baseline):
        changes = perf_db.compare(store, build.name, baseline)
    history = perf_db.history(store, build.name)
    series_builds = sorted({p["build"] for points in history.values() for p in points})
    table = perf_table(base + "perf", rows, changes)
    hist = history_table(base + "perf-history", history, series_builds)
    regressions = [c for c in changes or () if c["verdict"] == "regression"]
    site.page(base + "perf.html", "perf.html", title=f"Per-operator performance of build {build.name}", build=build,
              perf_table=table, history_table=hist, chart=ratio_chart(rows), baseline=baseline,
              has_changes=changes is not None, regressions=regressions, threshold=perf.DEFAULT_THRESHOLD,
              floor_us=perf.DEFAULT_FLOOR_S * 1e6, max_spread=perf.DEFAULT_MAX_SPREAD, limit=ROWS_SHOWN, downloads=[table, hist], generated=generated)
    return True
