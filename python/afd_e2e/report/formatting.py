"""How numbers read in the annotation, matching the seed PR's table (``2.4047 ± 0.0195 req/s``, ``+8.87%``)."""

from __future__ import annotations

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
