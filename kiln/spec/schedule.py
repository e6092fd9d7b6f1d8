"""Cron schedules of a spec (dataflow.links[].schedule) as systemd calendars, for the datamover role's timers."""

from __future__ import annotations

_DOW = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_CRON_FLOOR = (0, 0, 1, 1, 0)  # minute, hour, day of month, month, day of week


def _calendar_field(field: str, floor: int, dow: bool) -> str:
    parts = []
    for item in field.split(","):
        rng, _, step = item.partition("/")
        if dow and step:
            raise ValueError("a step in the day-of-week field has no systemd calendar equivalent")
        if rng == "*":
            parts.append(f"{floor}/{step}" if step else "*")
            continue
        lo, _, hi = rng.partition("-")
        if dow:
            if int(lo) > 7 or (hi and int(hi) > 7):
                raise ValueError(f"day of week {rng} is out of 0-7")
            parts.append(_DOW[int(lo)] + (f"..{_DOW[int(hi)]}" if hi else ""))
        else:
            parts.append(lo + (f"..{hi}" if hi else "") + (f"/{step}" if step else ""))
    return ",".join(parts)


def systemd_calendar(cron: str) -> str:
    """A 5-field cron schedule as a systemd OnCalendar expression (systemd.time(7)), for the datamover role's
    timers. Raises ValueError where the two disagree: cron ORs a restricted day of month with a restricted
    day of week, systemd ANDs them."""
    minute, hour, dom, month, dow = cron.split()
    if dom != "*" and dow != "*":
        raise ValueError("cron runs when the day of month OR the day of week matches; systemd needs both")
    m, h, d, mo = (_calendar_field(f, _CRON_FLOOR[i], False) for i, f in enumerate((minute, hour, dom, month)))
    weekday = "" if dow == "*" else _calendar_field(dow, 0, True) + " "
    return f"{weekday}*-{mo}-{d} {h}:{m}:00"
