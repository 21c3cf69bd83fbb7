"""Inline SVG charts rendered at build time: readable without JavaScript.

Every segment carries a fill pattern as well as a colour (see styles.py) and a
<title> for tooltips and screen readers; the pages put the same numbers in a
table next to each chart.
"""
from __future__ import annotations

from markupsafe import Markup, escape

from torchconform.dashboard.styles import CATEGORIES, breakdown_counts

# Pattern overlays drawn on top of each category's colour, as SVG fragments in a
# 8x8 tile.  Solid categories have none.
_OVERLAYS = {
    "pass": "",
    "pass_fallback": '<path d="M-2,2 l4,-4 M0,8 l8,-8 M6,10 l4,-4" stroke="#fff" stroke-width="1.6"/>',
    "host_only": '<circle cx="4" cy="4" r="2" fill="none" stroke="#0072B2" stroke-width="1.2"/>',
    "failed": '<path d="M0,0 L8,8 M8,0 L0,8" stroke="#222" stroke-width="1.2"/>',
    "skip_eligibility": '<circle cx="4" cy="4" r="1.3" fill="#444"/>',
    "missing_op": '<path d="M0,2 H8 M0,6 H8" stroke="#222" stroke-width="1.1"/>',
    "skiplist": '<path d="M2,0 V8 M6,0 V8" stroke="#555" stroke-width="1.1"/>',
    "unsupported_dtype": '<path d="M-2,6 l4,4 M0,0 l8,8 M6,-2 l4,4" stroke="#222" stroke-width="1.1"/>',
    "not_executed": '<rect x="3" y="3" width="2" height="2" fill="#fff"/>',
    "missing_distributed": '<path d="M0,4 H8 M4,0 V8" stroke="#fff" stroke-width="1.1"/>',
    "xfail": '<rect width="4" height="4" fill="#fff" fill-opacity=".45"/><rect x="4" y="4" width="4" height="4" fill="#fff" fill-opacity=".45"/>',
    "xpass": '<path d="M0,2 H8 M0,6 H8" stroke="#fff" stroke-width="1.1"/>',
}

# CSS versions of the same overlays, for HTML cells and legend swatches.
_CSS_OVERLAYS = {
    "pass": "none",
    "pass_fallback": "repeating-linear-gradient(45deg, transparent 0 3px, rgba(255,255,255,.75) 3px 5px)",
    "host_only": "radial-gradient(circle, transparent 1.5px, rgba(0,114,178,.8) 2px, transparent 2.6px) 0 0/8px 8px",
    "failed": "repeating-linear-gradient(45deg, transparent 0 5px, rgba(0,0,0,.35) 5px 6px),"
              " repeating-linear-gradient(-45deg, transparent 0 5px, rgba(0,0,0,.35) 5px 6px)",
    "skip_eligibility": "radial-gradient(circle, rgba(0,0,0,.5) 1px, transparent 1.5px) 0 0/6px 6px",
    "missing_op": "repeating-linear-gradient(0deg, transparent 0 3px, rgba(0,0,0,.45) 3px 4px)",
    "skiplist": "repeating-linear-gradient(90deg, transparent 0 3px, rgba(0,0,0,.35) 3px 4px)",
    "unsupported_dtype": "repeating-linear-gradient(-45deg, transparent 0 3px, rgba(0,0,0,.5) 3px 4px)",
    "not_executed": "radial-gradient(rgba(255,255,255,.8) 1px, transparent 1.5px) 0 0/5px 5px",
    "missing_distributed": "linear-gradient(rgba(255,255,255,.7) 1px, transparent 1px) 0 0/8px 8px,"
                           " linear-gradient(90deg, rgba(255,255,255,.7) 1px, transparent 1px) 0 0/8px 8px",
    "xfail": "repeating-conic-gradient(rgba(255,255,255,.45) 0 25%, transparent 0 50%) 0 0/8px 8px",
    "xpass": "repeating-linear-gradient(0deg, transparent 0 3px, rgba(255,255,255,.6) 3px 4px)",
}

# Text colour with enough contrast on each background.
_INK = {"pass": "#fff", "not_executed": "#fff", "missing_distributed": "#fff", "xpass": "#fff"}


def pattern_defs() -> Markup:
    """One hidden <svg> with a <pattern> per category; every chart on the page refers to them."""
    parts = ['<svg class="defs" width="0" height="0" aria-hidden="true" focusable="false"><defs>']
    for s in CATEGORIES:
        parts.append(
            f'<pattern id="p-{s.key}" width="8" height="8" patternUnits="userSpaceOnUse">'
            f'<rect width="8" height="8" fill="{s.colour}"/>{_OVERLAYS[s.key]}</pattern>'
        )
    parts.append("</defs></svg>")
    return Markup("".join(parts))


def category_css() -> str:
    """CSS classes c-<key> for cells and legend swatches, generated from the same table."""
    lines = []
    for s in CATEGORIES:
        overlay = _CSS_OVERLAYS[s.key]
        ink = _INK.get(s.key, "#111")
        background = s.colour if overlay == "none" else f"{overlay}, {s.colour}"
        lines.append(f".c-{s.key} {{ background: {background}; color: {ink}; }}")
    return "\n".join(lines) + "\n"


def _fmt(n: int) -> str:
    return f"{n:,}"


def breakdown_bar(b: dict, width: int = 1000, height: int = 36) -> Markup:
    """One horizontal stacked bar of a build's breakdown, segments proportional to counts."""
    counts = [(s, n) for s, n in breakdown_counts(b) if n > 0]
    total = sum(n for _, n in counts)
    label = f"Breakdown of {b['total']:,} outcomes of build {b['build']}"
    out = [f'<svg class="bar" viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
           f'role="img" aria-label="{escape(label)}">']
    if total == 0:
        out.append(f'<rect width="{width}" height="{height}" fill="#eee"/>')
    x = 0.0
    for s, n in counts:
        w = width * n / total
        title = f"{s.label}: {_fmt(n)} ({100 * n / total:.1f}%)"
        out.append(f'<rect x="{x:.2f}" y="0" width="{w:.2f}" height="{height}" fill="url(#p-{s.key})" '
                   f'stroke="#fff" stroke-width="1"><title>{escape(title)}</title></rect>')
        x += w
    out.append("</svg>")
    return Markup("".join(out))


def trend_chart(points: list[dict], width: int = 1000, height: int = 260, what: str = "Outcomes") -> Markup:
    """Stacked columns, one per build in time order.

    ``points``: [{"label": build name, "href": link or None, "breakdown": dict}], or
    with "counts": [(Style, n)] instead of a breakdown (the census's operators per status);
    optional "created" (the build's creation time, "YYYY-MM-DD HH:MM:SS").
    Absolute counts, so a run that lost tests shows as a shorter column.  Each column is
    one link (the whole column's height, so an empty or thin one can be clicked too)
    with the full build name in its tooltip; the axis shows a short label per column
    that tells the builds apart (``tick_labels``).  Every text from the store is escaped.
    """
    names = [str(p["label"]) for p in points]
    ticks = tick_labels(names, [p.get("created") for p in points])
    stacks = [p["counts"] if "counts" in p else breakdown_counts(p["breakdown"]) for p in points]
    totals = [p["breakdown"]["total"] if "breakdown" in p else sum(n for _, n in stack)
              for p, stack in zip(points, stacks)]
    n = max(len(points), 1)
    label_every = max(1, -(-n // 12))   # at most ~12 labels, so they never overlap
    # the labels hang down-left of their column at 35 degrees: room below and, for the
    # first column, to the left (else its label is clipped at the edge)
    longest = max((len(t) for t in ticks), default=0)
    reach = longest * _CHAR_W
    right, top = 8, 10
    bottom = int(18 + reach * _SIN35) + 6
    plot_h = height - top - bottom
    left = 56
    slot = (width - left - right) / n
    left = max(left, int(reach * _COS35 - slot / 2) + 4)
    plot_w = width - left - right
    slot = plot_w / n
    col_w = max(min(slot * 0.8, 60), 1.5)
    peak, step = _nice_scale(max(totals, default=0))
    unit = what[:1].lower() + what[1:]
    out = [f'<svg class="trend" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(what)} per build over {len(points)} builds (table below)">']
    # y axis: round tick values (1, 2 or 5 times a power of ten), at most six lines
    value = 0
    while value <= peak:
        y = top + plot_h - plot_h * value / peak
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">{_short(value)}</text>')
        value += step
    base_y = top + plot_h
    for i, (p, stack, total) in enumerate(zip(points, stacks, totals)):
        x = left + slot * i + (slot - col_w) / 2
        name = escape(names[i])
        when = f", created {escape(p['created'])}" if p.get("created") else ""
        title = f"{name}{when}: {_fmt(total)} {escape(unit)}"
        parts = [f'<title>{title}</title>',
                 # the column's whole height: what the link and the tooltip answer to
                 f'<rect class="hit" x="{x:.2f}" y="{top}" width="{col_w:.2f}" height="{plot_h}" '
                 f'fill="#fff" fill-opacity="0"/>']
        y = base_y
        for s, c in stack:
            if c <= 0:
                continue
            h = plot_h * c / peak
            y -= h
            parts.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{col_w:.2f}" height="{h:.2f}" '
                         f'fill="url(#p-{s.key})"><title>{name}: {escape(s.label)} {_fmt(c)}</title></rect>')
        if i % label_every == 0 or i == n - 1:
            cx = x + col_w / 2
            parts.append(f'<text x="{cx:.1f}" y="{base_y + 14}" class="axis tick" text-anchor="end" '
                         f'transform="rotate(-35 {cx:.1f} {base_y + 14})">{escape(ticks[i])}</text>')
        body = "".join(parts)
        if p.get("href"):
            out.append(f'<a href="{escape(p["href"])}" aria-label="{title}" class="col">{body}</a>')
        else:
            out.append(f'<g class="col">{body}</g>')
    out.append("</svg>")
    return Markup("".join(out))


# Label geometry at the axis font size (11 px in the chart's own units): an average
# character's advance, and the 35-degree slant of the labels.
_CHAR_W = 6.2
_SIN35, _COS35 = 0.574, 0.819
# Characters where a build name may be cut: what tells two names apart starts after one
# ("T" for the ISO times in the runner's default names, 20261201T090000...).
_CUTS = "-_./:T "
TICK_LIMIT = 14


def tick_labels(names: list[str], created: list | None = None, limit: int = TICK_LIMIT) -> list[str]:
    """A short label per build that tells the builds of one chart apart.

    The part of the names that differs (their common start and end cut off at a
    separator) when every such part is short and they are all different ("b1", "b2"; "3",
    "4" for nightly-3, nightly-4); else the creation time, as short as still tells them apart
    (date, then minutes, then seconds; a build made in the same second as another gets
    "#2", "#3"); without times, or where builds share a second, the differing parts cut
    in the middle if that still tells them apart.  The full name is in each column's tooltip."""
    if not names:
        return []
    parts = _differing_parts(names)
    if all(0 < len(p) <= limit for p in parts) and len(set(parts)) == len(parts):
        return parts
    cut = [p if len(p) <= limit else p[:limit // 2 - 1] + "\u2026" + p[-(limit - limit // 2):]
           for p in (q or n for q, n in zip(parts, names))]
    times = [_parse_time(t) for t in created] if created else []
    if times and all(times):
        same_year = len({t.year for t in times}) == 1
        same_day = len({t.date() for t in times}) == 1
        day = "%m-%d" if same_year else "%Y-%m-%d"
        formats = ([] if same_day else [day]) + (["%H:%M", "%H:%M:%S"] if same_day else
                                                  [f"{day} %H:%M", f"{day} %H:%M:%S"])
        for fmt in formats:
            labels = [t.strftime(fmt) for t in times]
            if len(set(labels)) == len(labels):
                return labels
        if len(set(cut)) < len(cut):
            return _numbered([t.strftime(formats[-1]) for t in times])
    return _numbered(cut)


def _differing_parts(names: list[str]) -> list[str]:
    """Each name less the start and end all names share (cut back to a separator, so
    "run-10"/"run-11" give "10"/"11", not "0"/"1")."""
    if len(names) < 2:
        return list(names)
    start = len(_common_prefix(names))
    while start > 0 and names[0][start - 1] not in _CUTS:
        start -= 1
    rest = [n[start:] for n in names]
    end = len(_common_prefix([r[::-1] for r in rest]))
    while end > 0 and rest[0][len(rest[0]) - end] not in _CUTS:
        end -= 1
    return [r[:len(r) - end] if end else r for r in rest]


def _common_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    return first[:i]


def _numbered(labels: list[str]) -> list[str]:
    """Labels made distinct: the second and later of equal ones get "#2", "#3"."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


def _parse_time(value):
    from datetime import datetime

    if isinstance(value, datetime):
        return value
    text = str(value or "").strip().rstrip("Z").replace("T", " ")
    try:
        return datetime.strptime(text[:19], "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None


def _nice_scale(peak: float) -> tuple[float, float]:
    """(top of the axis, step between gridlines): the step 1, 2 or 5 times a power of
    ten giving at most five steps, the top the first multiple of it at or above ``peak``
    (so a 6-test build reads 0, 2, 4, 6, not 0, 1.5, 3, 4.5, 6 rounded to look alike)."""
    if peak <= 0:
        return 1, 1
    power = 1
    while power * 10 <= peak:
        power *= 10
    while power > peak and power > 1:
        power //= 10
    for step in (power // 10 or 1, power // 5 or 1, power // 2 or 1, power, 2 * power, 5 * power, 10 * power):
        if step >= 1 and -(-peak // step) <= 5:
            return -(-peak // step) * step, step
    return -(-peak // (10 * power)) * 10 * power, 10 * power


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


def leaderboard_chart(rows: list[dict], top: int = 10, width: int = 1000) -> Markup:
    """Missing-operator leaderboard as horizontal bars: the operators in the ``top`` by tests
    blocked or by models blocked (``rows``: the leaderboard, in its order), each with a bar of
    tests blocked and one of models blocked, every panel scaled to its own largest count.
    Operator names are escaped (they come from the tests) and shortened on the axis, whole in
    each bar's <title>; the page's table has the same numbers."""
    models = [int(r.get("models", 0) or 0) for r in rows]
    by_models = sorted(range(len(rows)), key=lambda i: (-models[i], i))[:top]   # ties: the leaderboard's order
    chosen = set(range(min(top, len(rows)))) | {i for i in by_models if models[i] > 0}
    shown = [rows[i] for i in sorted(chosen) if rows[i].get("tests") or rows[i].get("models")]
    if not shown:
        return Markup("")
    label_w, gap, row_h, head = 250, 70, 22, 24
    panel_w = (width - label_w - 2 * gap) / 2
    height = head + row_h * len(shown) + 6
    panels = [("tests", "tests blocked", label_w), ("models", "models blocked", label_w + panel_w + gap)]
    out = [f'<svg class="leaders" viewBox="0 0 {width} {height}" role="img" aria-label="'
           f'{escape(f"Tests and models blocked by the {len(shown)} missing operators that block most (table below)")}">']
    for key, what, x0 in panels:
        out.append(f'<text x="{x0:.1f}" y="15" class="axis panel">{escape(what)}</text>')
    peaks = {key: max(int(r.get(key, 0) or 0) for r in shown) or 1 for key, _, _ in panels}
    for i, r in enumerate(shown):
        y = head + row_h * i
        op = str(r["op"])
        text = op if len(op) <= 34 else op[:33] + "\u2026"
        out.append(f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end" class="axis op">'
                   f'<title>{escape(op)}</title>{escape(text)}</text>')
        for key, what, x0 in panels:
            n = int(r.get(key, 0) or 0)
            w = panel_w * n / peaks[key]
            if n:
                out.append(f'<rect class="bar-{key}" x="{x0:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" '
                           f'fill="url(#p-missing_op)" stroke="#444" stroke-width=".5">'
                           f'<title>{escape(op)}: {_fmt(n)} {escape(what)}</title></rect>')
            out.append(f'<text x="{x0 + w + 4:.1f}" y="{y + 15}" class="axis n">{_fmt(n)}</text>')
    out.append("</svg>")
    return Markup("".join(out))
