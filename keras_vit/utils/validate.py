"""Checks at the door: every public keyword is checked for type and range before anything is built.

Booleans are not integers here, floats are never truncated to integers, and each error
names the field, the value received and what would work.
"""

from __future__ import annotations

import numbers
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np


def _shown(value) -> str:
    return f"{value!r} ({type(value).__name__})"


def integer(field: str, value, *, minimum: int = 1, allow_none: bool = False) -> Optional[int]:
    """`value` as an int >= `minimum`; integral floats (16.0) pass, 16.9 and True do not."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"{field} must be an integer >= {minimum}{' or None' if allow_none else ''}, got {_shown(value)}."
        )
    if not isinstance(value, numbers.Integral) and float(value) != int(value):
        raise ValueError(f"{field} must be a whole number, got {value!r}; it is not rounded for you.")
    if int(value) < minimum:
        raise ValueError(f"{field} must be >= {minimum}, got {value!r}.")
    return int(value)


def number(
    field: str, value, *, minimum: Optional[float] = None, below: Optional[float] = None, positive: bool = False
) -> float:
    """`value` as a finite float in [minimum, below) (and > 0 when `positive`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field} must be a number, got {_shown(value)}.")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{field} must be finite, got {value}.")
    if positive and value <= 0:
        raise ValueError(f"{field} must be > 0, got {value}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"{field} must be >= {minimum}, got {value}.")
    if below is not None and value >= below:
        raise ValueError(f"{field} must be < {below}, got {value}.")
    return value


def rate(field: str, value) -> float:
    """A dropout-style probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{field} must be a number in [0, 1), got {_shown(value)}.")
    return float(value)


def boolean(field: str, value, *, allow_none: bool = False) -> Optional[bool]:
    """True or False (numpy bools too), or None where `allow_none`; "yes" and 1 are refused rather than guessed."""
    if value is None and allow_none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{field} must be True or False{', or None' if allow_none else ''}, got {_shown(value)}.")
    return bool(value)


def nearest_multiples(size: int, multiple: int) -> str:
    """ "24 or 32": the multiples of `multiple` on either side of `size` (for errors about patch grids)."""
    lower = max(multiple, size // multiple * multiple)
    return f"{lower} or {lower + multiple}"


def choice(field: str, value, options: Sequence) -> object:
    if value not in options:
        raise ValueError(f"{field}={value!r} is not one of {', '.join(map(repr, options))}.")
    return value


def integers(field: str, value, *, minimum: int = 1, allow_empty: bool = False) -> Tuple[int, ...]:
    """A sequence of ints >= `minimum` (e.g. units per ResNet stage), non-empty unless `allow_empty`."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not (len(value) or allow_empty):
        raise ValueError(f"{field} must be a non-empty list of integers, got {_shown(value)}.")
    return tuple(integer(f"{field}[{i}]", v, minimum=minimum) for i, v in enumerate(value))


def image_shape(field: str, value) -> Tuple[Optional[int], Optional[int], Optional[int]]:
    """(height, width, channels): a list or tuple of three positive ints (or None)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 3:
        raise ValueError(f"{field} must be a tuple (height, width, channels), e.g. (224, 224, 3), got {_shown(value)}.")
    return tuple(integer(f"{field}[{i}]", v, allow_none=True) for i, v in enumerate(value))


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (library errors are often pages long), for one-line reports."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else "no message"


def did_you_mean(name: object, valid: Iterable) -> str:
    """ " (did you mean 'x'?)" naming the valid name closest to a misspelt `name`, else "" (for error messages)."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def refuse_unknown(where: str, keywords: Iterable[str], valid: Iterable[str]) -> None:
    """A TypeError naming the first of `keywords` that is not in `valid`, with the closest valid name, as Python
    names an unexpected keyword argument."""
    valid = set(valid)
    unknown = [k for k in keywords if k not in valid]
    if unknown:
        raise TypeError(f"{where} got an unexpected keyword argument {unknown[0]!r}{did_you_mean(unknown[0], valid)}.")
