"""How numbers read in the annotation, matching the seed PR's table (``2.4047 ± 0.0195 req/s``, ``+8.87%``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone

# Request rates are small numbers whose differences show in the third decimal; everything else reads with two.
_DECIMALS_BY_UNIT = {"req/s": 4}
MISSING = "—"


def measure(mean: float | None, std: float | None, unit: str) -> str:
    if mean is None:
        return MISSING
    decimals = _DECIMALS_BY_UNIT.get(unit, 2)
    spread = f" ± {std:.{decimals}f}" if std is not None else ""
    return f"{mean:.{decimals}f}{spread} {unit}".rstrip()


def percent(value: float | None) -> str:
    return MISSING if value is None else f"{value:+.2f}%"


def interval(bounds: Sequence[float] | None) -> str:
    if not bounds or len(bounds) != 2 or None in bounds:
        return MISSING
    return f"[{bounds[0]:+.2f}%, {bounds[1]:+.2f}%]"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time from results.json, or None when absent or malformed (partial results may lack it)."""
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def clock(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


BAR_CELLS = 21  # the margin bar spans ±2 margins, a fifth of a margin per cell


def margin_bar(bounds: Sequence[float] | None, margin_pct: float | None) -> str:
    """The delta's equivalence interval against ±margin as one line of text, e.g. ``··¦··■■0■··¦··``: ``¦`` the
    margins, ``0`` zero (both drawn over the interval), ``■`` the interval, ``◀``/``▶`` where it runs past ±2
    margins; parity is an interval wholly between the two ``¦``. Empty without an interval or a margin."""
    if not bounds or len(bounds) != 2 or not margin_pct or not all(math.isfinite(b) for b in bounds):
        return ""
    half = BAR_CELLS // 2
    step = 2 * margin_pct / half

    def cell(value: float) -> int:
        return max(0, min(BAR_CELLS - 1, half + round(value / step)))

    low, high = cell(bounds[0]), cell(bounds[1])
    cells = ["■" if low <= i <= high else "·" for i in range(BAR_CELLS)]
    cells[cell(-margin_pct)] = cells[cell(margin_pct)] = "¦"
    cells[half] = "0"
    if bounds[0] < -2 * margin_pct:
        cells[0] = "◀"
    if bounds[1] > 2 * margin_pct:
        cells[-1] = "▶"
    return "".join(cells)
