"""Models page: model x forward / backward / compiled for the model-zoo suite (suite == "models")."""
from __future__ import annotations

from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.styles import category_of
from torchconform.dashboard.tables import Table

VARIANT_ORDER = ("forward", "backward", "compiled")


def models_table(stem: str, outcomes: list) -> Table:
    variants = sorted({o.variant or "" for o in outcomes},
                      key=lambda v: (VARIANT_ORDER.index(v) if v in VARIANT_ORDER else 9, v))
    cells: dict[str, dict[str, object]] = {}
    for o in outcomes:
        model = o.op or o.name or o.test_id
        cells.setdefault(model, {})[o.variant or ""] = o
    t = Table(stem, ["model", *variants, "detail"], title="Models")
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
        t.rows.append(row)
    return t


def render(site, models_by_slug: dict[str, list], latest: list[BuildInfo], generated: str):
    """``models_by_slug``: the model-zoo outcomes (suite == "models") of each build."""
    sections, tables = [], []
    for b in latest:
        outcomes = models_by_slug.get(b.slug)
        if not outcomes:
            continue
        table = models_table(f"tables/models-{b.slug}", outcomes)
        sections.append({"build": b, "table": table})
        tables.append(table)
    return site.page("models.html", "models.html", title="Model zoo", sections=sections, downloads=tables,
                     generated=generated)
