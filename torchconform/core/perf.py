"""Per-operator performance: what a perf test measured, per outcome, and how two builds compare.

The perf suite (suites/perf/) times one operator x dtype on the device and on CPU in the
same test and leaves one row per direction (``forward``, ``backward``) with :func:`record`;
the worker plugin clears the rows before each test and takes them with the call phase's
report (like ``numeric`` and ``notes``), the controller hangs them on the outcome
(``Outcome.perf``) and the store writes them to ``perf_results`` (db/perf.py).

A row (JSON-able): ``op``, ``dtype``, ``direction``, ``variant`` (``eager``, or ``compiled``:
the same call through ``torch.compile``, its first call including the compile; a row without
one is eager), ``sample`` (what the input was),
``calls`` (warm calls per side), and per side (``dev``, ``cpu``) ``first`` (the first call:
time to first result) and ``min`` / ``median`` / ``max`` over the warm calls, in seconds.

The comparison is noise-aware (docs/perf.md): a regression is judged on the device/CPU
ratio of the warm minimums, both measured in the same run (a slower machine slows both
sides), against the baseline's ratio; it trips above ``threshold`` (default 1.25x), and an
operator whose device minimum is below ``floor_s`` in both builds is not judged at all, nor one
whose readings were noisy (:func:`spread`, the median over the minimum of either side in either
build, above ``max_spread``): under heavy load a device with its own autograd thread pays a
scheduler wake-up on every backward call (milliseconds at a load of 7x the cores), which no
ratio cancels; such a timing is reported as ``noisy``, to be judged by a quieter run.
"""
from __future__ import annotations

FORWARD, BACKWARD = "forward", "backward"
DIRECTIONS = (FORWARD, BACKWARD)
EAGER, COMPILED = "eager", "compiled"
VARIANTS = (EAGER, COMPILED)
SIDES = ("dev", "cpu")
STATS = ("first", "min", "median", "max")
# Every figure of a row, by its column name (dev_first ... cpu_max).
FIGURES = tuple(f"{side}_{stat}" for side in SIDES for stat in STATS)

DEFAULT_THRESHOLD = 1.25
DEFAULT_FLOOR_S = 2e-4
DEFAULT_MAX_SPREAD = 1.25

_rows: list[dict] = []


def record(row: dict) -> None:
    """Add one measured row to the running test's outcome."""
    _rows.append(dict(row))


def take() -> list[dict] | None:
    """The running test's rows (None: it measured nothing), cleared."""
    if not _rows:
        return None
    out = list(_rows)
    _rows.clear()
    return out


def clear() -> None:
    _rows.clear()


def ratio(row: dict) -> float | None:
    """Device / CPU of the warm minimums (None where either is missing or the CPU's is 0)."""
    dev, cpu = row.get("dev_min"), row.get("cpu_min")
    if dev is None or not cpu:
        return None
    return dev / cpu


def spread(row: dict) -> float:
    """How disturbed the warm readings were: the larger median / min of the two sides (1.0: steady)."""
    out = 1.0
    for side in SIDES:
        low, mid = row.get(f"{side}_min"), row.get(f"{side}_median")
        if low and mid:
            out = max(out, mid / low)
    return out


def key(row: dict) -> tuple[str, str, str, str]:
    """What a timing is of: (op, dtype, direction, variant).  A compiled timing is only ever
    compared with the same operator compiled."""
    return row["op"], row.get("dtype") or "", row.get("direction") or FORWARD, row.get("variant") or EAGER


def compare(old: list[dict], new: list[dict], threshold: float = DEFAULT_THRESHOLD,
            floor_s: float = DEFAULT_FLOOR_S, max_spread: float = DEFAULT_MAX_SPREAD) -> list[dict]:
    """Per (op, dtype, direction, variant) measured in both builds: the baseline's and the build's
    device/CPU ratio, their change (new / old) and the verdict, largest change first.

    ``verdict``: ``regression`` (change above ``threshold``), ``improvement`` (below
    1 / threshold), ``same``, ``below floor`` (the device minimum under ``floor_s``
    in both builds: too small to time reliably) or ``noisy`` (a :func:`spread` above
    ``max_spread`` in either build); the last two are not judged."""
    before = {key(r): r for r in old}
    out = []
    for r in new:
        k = key(r)
        b = before.get(k)
        if b is None:
            continue
        old_ratio, new_ratio = ratio(b), ratio(r)
        if old_ratio is None or new_ratio is None or old_ratio <= 0:
            continue
        change = new_ratio / old_ratio
        noise = max(spread(b), spread(r))
        if max(b.get("dev_min") or 0.0, r.get("dev_min") or 0.0) < floor_s:
            verdict = "below floor"
        elif noise > max_spread:
            verdict = "noisy"
        elif change > threshold:
            verdict = "regression"
        elif change < 1.0 / threshold:
            verdict = "improvement"
        else:
            verdict = "same"
        out.append({"op": k[0], "dtype": k[1], "direction": k[2], "variant": k[3], "old_ratio": old_ratio, "new_ratio": new_ratio,
                    "change": change, "verdict": verdict, "spread": noise, "old_dev_min": b.get("dev_min"),
                    "new_dev_min": r.get("dev_min"), "old_cpu_min": b.get("cpu_min"), "new_cpu_min": r.get("cpu_min")})
    out.sort(key=lambda d: (-d["change"], d["op"], d["dtype"], d["direction"], d["variant"]))
    return out


def regressions(old: list[dict], new: list[dict], threshold: float = DEFAULT_THRESHOLD,
                floor_s: float = DEFAULT_FLOOR_S, max_spread: float = DEFAULT_MAX_SPREAD) -> list[dict]:
    """The rows of :func:`compare` judged a regression, largest change first."""
    return [d for d in compare(old, new, threshold, floor_s, max_spread) if d["verdict"] == "regression"]


def slowest(rows: list[dict], top: int | None = None) -> list[dict]:
    """Rows by device/CPU ratio, slowest relative to CPU first (rows without one last)."""
    ordered = sorted(rows, key=lambda r: (-(ratio(r) or 0.0), r["op"], r.get("dtype") or "",
                                          r.get("direction") or "", r.get("variant") or EAGER))
    return ordered if top is None else ordered[:top]


def note_text(rows: list[dict]) -> str:
    """The message of a passing perf test: each direction's warm minimums and their ratio
    (a compiled timing also its first call, the compile included)."""
    parts = []
    for r in rows:
        q = ratio(r)
        if (r.get("variant") or EAGER) != EAGER:
            parts.append(f"{r['variant']} {r['direction']} first device {_us(r.get('dev_first'))} "
                         f"cpu {_us(r.get('cpu_first'))}, warm device {_us(r.get('dev_min'))} cpu {_us(r.get('cpu_min'))}"
                         + (f" ratio {q:.3g}x" if q is not None else ""))
            continue
        parts.append(f"{r['direction']} device {_us(r.get('dev_min'))} cpu {_us(r.get('cpu_min'))}"
                     + (f" ratio {q:.3g}x" if q is not None else ""))
    return "perf: " + "; ".join(parts)


def _us(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f}us"
