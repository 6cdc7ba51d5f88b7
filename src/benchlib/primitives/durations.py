"""Short human durations for progress lines and ETAs (no dependencies: every layer may use it)."""

from __future__ import annotations


def format_duration(seconds: float) -> str:
    """A short duration: ``42s``, ``3m05s``, ``2h07m``, ``3d04h`` (``unknown`` if not finite)."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return "unknown"
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
