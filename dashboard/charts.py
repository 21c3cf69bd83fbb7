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
}

# Text colour with enough contrast on each background.
_INK = {"pass": "#fff", "not_executed": "#fff", "missing_distributed": "#fff"}


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
    with "counts": [(Style, n)] instead of a breakdown (the census's operators per status).
    Absolute counts, so a run that lost tests shows as a shorter column.
    """
    left, right, top, bottom = 80, 8, 10, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    stacks = [p["counts"] if "counts" in p else breakdown_counts(p["breakdown"]) for p in points]
    peak = max((p["breakdown"]["total"] if "breakdown" in p else sum(n for _, n in stack)
                for p, stack in zip(points, stacks)), default=0) or 1
    n = max(len(points), 1)
    slot = plot_w / n
    col_w = max(min(slot * 0.8, 60), 1.5)
    out = [f'<svg class="trend" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(what)} per build over {len(points)} builds (table below)">']
    # y axis: four gridlines with counts
    for i in range(5):
        value = peak * i / 4
        y = top + plot_h - plot_h * i / 4
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">{_short(value)}</text>')
    label_every = max(1, int(n / 12 + 0.999))
    for i, (p, stack) in enumerate(zip(points, stacks)):
        x = left + slot * i + (slot - col_w) / 2
        y = top + plot_h
        segs = []
        for s, c in stack:
            if c <= 0:
                continue
            h = plot_h * c / peak
            y -= h
            segs.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{col_w:.2f}" height="{h:.2f}" '
                        f'fill="url(#p-{s.key})"><title>{escape(p["label"])}: {escape(s.label)} '
                        f'{_fmt(c)}</title></rect>')
        body = "".join(segs)
        if p.get("href"):
            body = f'<a href="{escape(p["href"])}" aria-label="{escape(p["label"])}">{body}</a>'
        out.append(body)
        if i % label_every == 0 or i == n - 1:
            cx = x + col_w / 2
            text = p["label"] if len(p["label"]) <= 14 else p["label"][:13] + "\u2026"
            out.append(f'<text x="{cx:.1f}" y="{top + plot_h + 14}" class="axis" text-anchor="end" '
                       f'transform="rotate(-30 {cx:.1f} {top + plot_h + 14})">{escape(text)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"
