"""Models page: model x forward / backward / compiled for the model-zoo suite (suite == "models")."""
from __future__ import annotations

from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.styles import category_of
from torchconform.dashboard.tables import Table

VARIANT_ORDER = ("forward", "backward", "compiled")


def models_table(stem: str, outcomes: list, blocking: dict | None = None) -> Table:
    """``blocking``: model -> every operator blocking it (the build's census and the model's
    operator set); adds a column when the build has any."""
    variants = sorted({o.variant or "" for o in outcomes},
                      key=lambda v: (VARIANT_ORDER.index(v) if v in VARIANT_ORDER else 9, v))
    cells: dict[str, dict[str, object]] = {}
    for o in outcomes:
        model = o.op or o.name or o.test_id
        cells.setdefault(model, {})[o.variant or ""] = o
    t = Table(stem, ["model", *variants, "detail", *(["blocking operators"] if blocking else [])], title="Models")
    for i, model in enumerate(sorted(cells)):
        row = [model]
        details = []
        for v in variants:
            o = cells[model].get(v)
            if o is None:
                row.append("")
                continue
            label = o.outcome if not o.kind else f"{o.outcome}/{o.kind}"
            row.append(label)
            t.classes.setdefault(v, {})[i] = category_of(o.outcome, o.kind)
            if o.missing_op:
                details.append(f"{v}: missing {o.missing_op}")
            elif o.message and o.outcome not in ("pass", "pass_fallback"):
                details.append(f"{v}: {o.message}")
        row.append("; ".join(details))
        if blocking:
            row.append(" ".join(blocking.get(model, [])))
        t.rows.append(row)
    return t


def render(site, models_by_slug: dict[str, list], latest: list[BuildInfo], generated: str,
           blocking: dict[str, dict] | None = None):
    """``models_by_slug``: the model-zoo outcomes (suite == "models") of each build; ``blocking``:
    per build slug, model -> its blocking operators (builds with a census)."""
    sections, tables = [], []
    for b in latest:
        outcomes = models_by_slug.get(b.slug)
        if not outcomes:
            continue
        table = models_table(f"tables/models-{b.slug}", outcomes, (blocking or {}).get(b.slug))
        sections.append({"build": b, "table": table})
        tables.append(table)
    return site.page("models.html", "models.html", title="Model zoo", sections=sections, downloads=tables,
                     generated=generated)
