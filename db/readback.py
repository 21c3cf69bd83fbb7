"""Traits read back from a stored build: the trait notes of its ``traits`` suite
outcomes (latest result per test), for ``summary --json`` and the text summary."""
from __future__ import annotations

from torchconform.core.traitnotes import traits_from_messages
from torchconform.db.read_rows import latest_rows

SUITE = "traits"
# One line per trait in the text summary: (label, dotted key of the traits dict).
TEXT_KEYS = (
    ("float64 executes as", "precision.float64.executes_as"),
    ("copies non-contiguous inputs", "noncontiguous_copy.copies"),
    ("  bytes per call", "noncontiguous_copy.bytes_per_call"),
    ("recompiles per new shape", "static_shapes.recompiles_per_new_shape"),
    ("cold compile (s)", "static_shapes.cold_compile_s"),
    ("warm call (s)", "static_shapes.warm_call_s"),
    ("eager CPU fallback ops", "fallback.eager_ops"),
    ("compile-time fallback", "fallback.compile_fallback"),
    ("placeholder-output ops", "placeholder_outputs.ops"),
    ("memory counters lag without sync", "memory_stats.lags_without_sync"),
)
ENVIRONMENT_KEYS = ("os", "cpu_model", "cpu_count", "numa_nodes", "cpu_affinity", "mems_allowed", "memory_policy",
                    "torch", "backend", "python")


def stored_traits(store, build: str) -> tuple[dict, dict | None]:
    """``(traits, environment)`` of a build; ``({}, None)`` when it has no traits run."""
    messages = [row.message for row in latest_rows(store, build, ("suite", "message"))
                if row.suite == SUITE and row.message]
    traits = traits_from_messages(messages)
    return traits, traits.pop("environment", None)


def lookup(traits: dict, dotted: str):
    """``traits["a"]["b"]["c"]`` for ``"a.b.c"``; None where a level is absent."""
    value = traits
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def value_text(value) -> str:
    if value is None:
        return "not measured"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def traits_from_records(records) -> dict:
    """The traits of a build from its records (dicts with ``suite`` and ``message``: the gate's)."""
    traits = traits_from_messages(r["message"] for r in records if r.get("suite") == SUITE and r.get("message"))
    traits.pop("environment", None)
    return traits


def compare_traits(old: dict, new: dict) -> list[tuple[str, str, str, bool]]:
    """(label, baseline text, build text, changed) per trait of TEXT_KEYS; nothing counts as
    changed where the baseline measured no traits at all (it did not run the suite)."""
    rows = []
    for label, key in TEXT_KEYS:
        before, after = value_text(lookup(old, key)), value_text(lookup(new, key))
        rows.append((label.strip(), before, after, bool(old) and bool(new) and before != after))
    return rows


def format_traits(traits: dict, environment: dict | None) -> str:
    """The text summary's traits and environment block ("" when the build has neither)."""
    lines = []
    if traits:
        lines.append("traits (suite traits):")
        for label, key in TEXT_KEYS:
            trait = lookup(traits, key.rsplit(".", 1)[0])
            why = trait.get("reason") if isinstance(trait, dict) and trait.get("measurable") is False else ""
            lines.append(f"  {label:<34} {value_text(lookup(traits, key))}" + (f" ({why})" if why else ""))
    if environment:
        lines.append("environment:")
        lines += [f"  {key:<34} {value_text(environment.get(key))}" for key in ENVIRONMENT_KEYS]
        launch = (environment.get("evidence") or {}).get("launch")
        if launch:
            lines.append(f"  {'launch':<34} {launch}")
    return "\n".join(lines)
