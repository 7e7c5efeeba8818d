"""Parsing of human units: rates, durations, probabilities and sizes.

Every parser accepts a number (already in base units) or a string with a unit and
raises ``ValueError`` naming what was wrong and what is allowed; a bool, a list or a table is
never a quantity (TOML's ``true`` is not a rate of 1 bit/s).  Decimal prefixes
are decimal (1 Mbit = 10^6 bit, 1 MB = 10^6 B); binary ones are explicit (1 MiB = 2^20 B),
as in CHAPTER12.md.
"""
from __future__ import annotations

import math
import re
from typing import Any

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_SPLIT = re.compile(r"^\s*" + _NUMBER + r"\s*([A-Za-z%/]*)\s*$")

RATE_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
TIME_UNITS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
SIZE_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
              "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def _number(value) -> bool:
    """An int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def written(value) -> str:
    """``value`` in a message as a person wrote it: a bool as TOML's ``true``/``false`` (not
    Python's ``True``), anything else as its repr."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _split(text: str, what: str, allowed: str) -> tuple[float, str]:
    match = _SPLIT.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"cannot read {what} {written(text)}: expected a non-negative number with a "
                         f"unit; {allowed}")
    number = float(match.group(1))
    if not math.isfinite(number):       # 1e400: too large for a float
        raise ValueError(f"{what} {written(text)} is too large: not a finite number; {allowed}")
    return number, match.group(2)


#: a rate in a string without a unit below this many bit/s is refused (``parse_rate``):
#: "rate=5" is 5 bit/s, almost always meant as 5 Mbit/s
BARE_RATE_MIN_BPS = 1000.0


def parse_rate(value: float | int | str) -> float:
    """Rate in bit/s from 333e6, '333mbit', '333Mbit/s', '1gbit', '64kbit'.  A string without a
    unit is bit/s, and refused below ``BARE_RATE_MIN_BPS`` (a number is bit/s whatever its size)."""
    if _number(value):
        return float(value)
    number, unit = _split(value, "rate", f"units: {', '.join(RATE_UNITS)}, e.g. 333mbit")
    if not unit and 0 < number < BARE_RATE_MIN_BPS:
        raise ValueError(f"rate {value.strip()} has no unit, which is {number:g} bit/s; write "
                         f"{number:g}mbit for Mbit/s (or {number:g}kbit for kbit/s)")
    key = _rate_key(unit)
    if unit.lower().endswith("bps") and not unit.lower().endswith("bitps"):
        raise ValueError(f"ambiguous rate unit {unit!r} in {value!r}: tc reads 'mbps' as megabytes/s; "
                         f"write bits, e.g. '{number:g}mbit' (allowed: {', '.join(RATE_UNITS)})")
    if key not in RATE_UNITS:
        raise ValueError(f"unknown rate unit {unit!r} in {value!r}; allowed: {', '.join(RATE_UNITS)} "
                         "(optionally followed by /s)")
    return number * RATE_UNITS[key]


def _rate_key(unit: str) -> str:
    """``RATE_UNITS``' key of a rate unit as written ("Mbit/s" → "mbit"); "bit" for none."""
    return unit.lower().removesuffix("/s").removesuffix("ps") if unit else "bit"


def rate_unit(value: float | int | str) -> str | None:
    """The unit a rate that ``parse_rate`` read was written in (``RATE_UNITS``' key: "mbit" for
    '5Mbit/s'); None for a number or a string without a unit (bit/s)."""
    match = _SPLIT.match(value) if isinstance(value, str) else None
    if match is None or not match.group(2):
        return None
    return _rate_key(match.group(2))


#: a link's rate, bit/s: from 1 kbit/s (below it is almost always a forgotten unit: a number is
#: bit/s) to 100 Gbit/s
MIN_RATE, MAX_RATE = 1e3, 100e9


def rate_refusal(bps: float, written: Any = None) -> str | None:
    """Why a link's rate of ``bps`` bit/s is refused (outside ``MIN_RATE``..``MAX_RATE``), or
    None.  ``written``: the rate as given (``units.parse_rate``'s input; None: a number).  With
    a unit the allowed range is said in it too; without one, where the number would be in range
    as Mbit/s, that it may have been meant so."""
    if MIN_RATE <= bps <= MAX_RATE:
        return None
    unit = rate_unit(written)
    allowed = f"a link's rate is {format_rate(MIN_RATE)} to {format_rate(MAX_RATE)}"
    if unit is not None:
        scale = RATE_UNITS[unit]
        return (f"rate {str(written).strip()} is out of range; {allowed} "
                f"({MIN_RATE / scale:g}{unit} to {MAX_RATE / scale:g}{unit}), e.g. 10mbit")
    hint = ", e.g. 10mbit"
    if bps < MIN_RATE and MIN_RATE <= bps * 1e6 <= MAX_RATE:
        hint = f" (a number without a unit is bit/s: write {bps:g}mbit for Mbit/s)"
    return f"rate {bps:g} bit/s is out of range; {allowed}{hint}"


def parse_link_rate(value: Any) -> float | None:
    """A link's rate in bit/s as written (``parse_rate``), None for unshaped (None, '',
    'unshaped', 'none'); a ValueError when it is not > 0 or out of range (``rate_refusal``, said
    in the unit it was written in).  ``LinkSpec.parse`` and a schedule's steps read rates so."""
    if value in (None, "", "unshaped", "none"):
        return None
    bps = parse_rate(value)
    if not bps > 0:
        raise ValueError(f"rate {value!r} must be > 0 bit/s, or 'unshaped'")
    if why := rate_refusal(bps, value):
        raise ValueError(why)
    return bps


def parse_time(value: float | int | str) -> float:
    """Duration in seconds from 0.1, '100ms', '0.1s', '50us'. A bare number in a string is seconds."""
    if _number(value):
        return float(value)
    number, unit = _split(value, "duration", f"units: {', '.join(TIME_UNITS)}, e.g. 100ms")
    key = unit.lower() or "s"
    if key not in TIME_UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {value!r}; allowed: {', '.join(TIME_UNITS)}")
    return number * TIME_UNITS[key]


#: a duration without a unit above this many seconds is refused where a delay is meant
#: (``parse_delay``): "delay=10" is 10 s, almost always meant as 10 ms
BARE_DELAY_MAX_S = 1.0


def parse_delay(value: float | int | str, what: str = "delay") -> float:
    """``parse_time`` for a delay or jitter, refusing a string without a unit above
    ``BARE_DELAY_MAX_S`` (a number is seconds; "10" would silently be 10 s, a queue of
    hundreds of thousands of packets): the message names the unit and the likely meaning.
    What a person typed reaches it as text (``delay_as_written``)."""
    seconds = parse_time(value)
    if isinstance(value, str) and seconds > BARE_DELAY_MAX_S:
        number, unit = _split(value, what, "")
        if not unit:
            raise ValueError(f"{what}={value.strip()} has no unit, which is {seconds:g} s; write "
                             f"{number:g}ms for milliseconds (or {number:g}s if you mean seconds)")
    return seconds


def names_a_delay(key: str) -> bool:
    """``key`` (a KEY, PATH or LINK.DIR.FIELD) names a delay or jitter: ``delay``, ``delay1``,
    ``edge_delay``, ``bottleneck.down.jitter`` (not ``nodelay``)."""
    return re.search(r"(^|_)(delay|jitter)\d*($|_)", key.strip().rsplit(".", 1)[-1]) is not None


def delay_as_written(key: str, value):
    """``value`` of ``key`` in a file a person wrote (TOML): a number given for a delay or jitter
    as its text, so that ``parse_delay`` refuses ``delay = 100`` (100 s) as it refuses
    ``--set delay=100``; any other value as it is."""
    return str(value) if _number(value) and names_a_delay(key) else value


def parse_probability(value: float | int | str) -> float:
    """Probability in [0, 1] from 0.14 or '14%'. Range is checked by the caller."""
    if _number(value):
        return float(value)
    number, unit = _split(value, "probability", "write 0.14 or 14%")
    if unit == "%":
        return number / 100.0
    if unit:
        raise ValueError(f"unknown probability unit {unit!r} in {value!r}; write 0.14 or '14%'")
    return number


def parse_size(value: float | int | str) -> int:
    """Size in bytes from 354640, '354640b', '64KB', '30MB', '64MiB'."""
    if _number(value) and math.isfinite(value):
        return int(value)
    number, unit = _split(value, "size", "units: B, KB, MB, GB, KiB, MiB, GiB, e.g. 64KB")
    key = unit.lower() or "b"
    if key not in SIZE_UNITS:
        raise ValueError(f"unknown size unit {unit!r} in {value!r}; allowed: B, KB, MB, GB, KiB, MiB, GiB")
    if not math.isfinite(number * SIZE_UNITS[key]):     # 1e300GB
        raise ValueError(f"size {value!r} is too large: not a finite number of bytes")
    return int(round(number * SIZE_UNITS[key]))


def parse_queue(value: int | str) -> tuple[int | None, int | None]:
    """A queue limit: 1000, '1000' or '1000p' → (packets, None); '1.5MB' → (None, bytes).  A
    number is read as its text: 1.5 is no packet count."""
    text = str(value) if _number(value) else value
    number, unit = _split(text, "queue limit", "packets (1000 or 1000p) or a size (1.5MB)")
    if unit.lower() in ("", "p", "pkt", "packets"):
        if number != int(number):
            raise ValueError(f"queue limit {value!r}: a packet count must be whole")
        return int(number), None
    return None, parse_size(text)


def parse_count(value: int | str, what: str = "count") -> int:
    """A whole number >= 0 from 5, 5.0 or '5'."""
    text = str(value) if _number(value) else value
    match = _SPLIT.match(text) if isinstance(text, str) else None
    if not match or match.group(2) or not float(match.group(1)).is_integer():
        raise ValueError(f"{what} {value!r} must be a whole number >= 0, e.g. 5")
    return int(float(match.group(1)))


def parse_bool(value: bool | int | str) -> bool:
    """true/false, yes/no, on/off, 1/0 (any case) or a bool."""
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean (true/false, yes/no, on/off, 1/0), got {value!r}")


def format_number(v: float, digits: int = 4) -> str:
    """``v`` to ``digits`` significant digits, or whole with thousands commas where that would
    take an exponent: "1185.3", "0.1548", "240,411" (not "2.404e+05")."""
    text = f"{v:.{digits}g}"
    return f"{v:,.0f}" if "e+" in text else text


def counted(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless ``n`` is 1: "1 outage", "2 outages", "0 events"."""
    return f"{n} {noun}{'s' * (n != 1)}"


def format_rate(bps: float | None, words: bool = False) -> str:
    """A rate as an option takes it ("333mbit"), or with ``words`` as a sentence writes it
    ("333 Mbit/s"); "unshaped" for None."""
    if bps is None:
        return "unshaped"
    for unit, word, scale in (("gbit", "Gbit/s", 1e9), ("mbit", "Mbit/s", 1e6), ("kbit", "kbit/s", 1e3),
                              ("bit", "bit/s", 1)):
        if bps >= scale or scale == 1:
            return f"{bps / scale:g} {word}" if words else f"{bps / scale:g}{unit}"


def format_time(seconds: float, words: bool = False) -> str:
    """A duration as an option takes it ("200ms"), or with ``words`` as a sentence writes it
    ("200 ms")."""
    gap = " " if words else ""
    if seconds == 0 or seconds >= 1:
        return f"{seconds:g}{gap}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g}{gap}ms"
    return f"{seconds * 1e6:g}{gap}us"

