"""Scheduler hyper-parameters checked against their declared types.

A scheduler declares its hyper-parameters as keyword-only constructor arguments with
type hints (``insertion: bool = True``, ``time_limit_s: float = 10.0``, ``seed: int |
None = 0``). :func:`check_params` reads those declarations and checks the values a
caller passes, in one place for every scheduler (:class:`schedulers.base.Scheduler`
runs it before each subclass's ``__init__``):

* ``bool``: ``True``/``False``, ``0``/``1``, or a word (``true``, ``false``, ``yes``,
  ``no``, ``on``, ``off``, any case), as a command line or a sweep file gives it;
* ``int``: an int (not a bool), a float without fraction, or a string of digits;
* ``float``: an int or a float, or a string that parses as one;
* ``str``: a string;
* ``X | None``: also None (or the string ``none``/``null``).

Numbers must be finite and >= 0 (a time limit, a count, a seed), or >= the scheduler's
``minimum`` for that hyper-parameter (``Scheduler.minimum``: ``{"microbatches": 1}``). A
value of another type is a :class:`SchedulerError` naming the scheduler, the
hyper-parameter, what it must be and what it got. An annotation other than these (a class, a Literal) is left
to the scheduler.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

__all__ = ["check_params", "declared_types", "parse_bool"]

#: the annotation names this module checks, by the type they name
_SIMPLE = {"bool": bool, "int": int, "float": float, "str": str, "None": type(None)}
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def parse_bool(value: Any) -> bool | None:
    """``value`` as a bool: a bool, 0 or 1, or a word (true/false, yes/no, on/off);
    None when it is none of these.

    >>> parse_bool("False"), parse_bool("yes"), parse_bool(1), parse_bool("maybe")
    (False, True, True, None)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def _types_of(annotation: Any) -> tuple[type, ...] | None:
    """The simple types an annotation names (``"int | None"`` -> ``(int, NoneType)``);
    None when it names anything else."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):
        parts = [p.strip() for p in annotation.split("|")]
        if not all(p in _SIMPLE for p in parts):
            return None
        return tuple(_SIMPLE[p] for p in parts)
    if annotation in _SIMPLE.values():
        return (annotation,)
    args = getattr(annotation, "__args__", None)
    if args and all(a in _SIMPLE.values() for a in args):
        return tuple(args)
    return None


@cache
def declared_types(init: Callable[..., Any]) -> Mapping[str, tuple[type, ...]]:
    """``{name: types}`` of the keyword-only arguments of a constructor whose type
    hints this module checks."""
    out: dict[str, tuple[type, ...]] = {}
    for name, p in inspect.signature(init).parameters.items():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        types = _types_of(p.annotation)
        if types is not None:
            out[name] = types
    return out


def _number(value: Any, kind: type, low: float) -> int | float | None:
    """``value`` as a finite number >= ``low`` of ``kind`` (int or float); None when it is not one."""
    if isinstance(value, str):
        try:
            value = float(value) if kind is float else int(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        if not math.isfinite(float(value)) or value < low:
            return None
    except OverflowError:
        return None
    if kind is int:
        if isinstance(value, float):
            if not value.is_integer():
                return None
            value = int(value)
        return value
    return float(value)


def _convert(value: Any, types: tuple[type, ...], low: float) -> tuple[bool, Any]:
    """``(ok, value as its declared type)``."""
    if type(None) in types and (value is None or (isinstance(value, str) and value.strip().lower()
                                                  in ("none", "null") and str not in types)):
        return True, None
    if bool in types:
        b = parse_bool(value)
        if b is not None:
            return True, b
    for kind in (int, float):
        if kind in types and not (isinstance(value, str) and str in types):
            n = _number(value, kind, low)
            if n is not None:
                return True, n
    if str in types and isinstance(value, str):
        return True, value
    return False, value


def _describe(types: tuple[type, ...], low: float) -> str:
    words = {bool: "true or false", int: f"an int >= {low:g}", float: f"a finite number >= {low:g}",
             str: "a string", type(None): "None"}
    return " or ".join(words[t] for t in types)


def check_params(scheduler: str, init: Callable[..., Any], params: Mapping[str, Any],
                 minimum: Mapping[str, float] | None = None) -> dict[str, Any]:
    """``params`` converted to the types ``init`` declares.

    Parameters
    ----------
    scheduler
        Name for the messages.
    init
        The scheduler's ``__init__``.
    params
        Keyword arguments a caller passes (others than declared ones pass unchanged:
        the constructor refuses an unknown one).
    minimum
        The smallest value of a numeric hyper-parameter, where it is above 0.

    Raises
    ------
    SchedulerError
        for a value that is not of its declared type.

    Examples
    --------
    >>> def init(self, *, insertion: bool = True, time_limit_s: float = 1.0): ...
    >>> check_params("x", init, {"insertion": "no", "time_limit_s": "2"})
    {'insertion': False, 'time_limit_s': 2.0}
    """
    # import cycle: hetsim.schedulers.base -> hetsim.schedulers.hyperparams
    from hetsim.schedulers.base import SchedulerError

    declared = declared_types(init)
    out = dict(params)
    for key, value in params.items():
        types = declared.get(key)
        if types is None:
            continue
        low = (minimum or {}).get(key, 0)
        ok, converted = _convert(value, types, low)
        if not ok:
            raise SchedulerError(
                f"{scheduler}: hyper-parameter {key!r} must be {_describe(types, low)}, got {value!r:.60}")
        out[key] = converted
    return out
