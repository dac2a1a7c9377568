"""TOML text of a platform's table structure (:meth:`sim.platform.Platform.to_dict`).

The standard library reads TOML (``tomllib``) but does not write it. This writer
covers what a platform holds: top-level scalars, tables (``[calibration]``),
arrays of tables (``[[devices]]``) whose values are scalars, arrays of scalars or
inline tables (a memory domain's ``demand_bytes_per_s``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["toml_text"]


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML value for {type(v).__name__} {v!r:.60}")


def _key(k: str) -> str:
    bare = k and all(c.isalnum() or c in "-_" for c in k) and k.isascii()
    return k if bare else json.dumps(k)


def toml_text(data: Mapping[str, Any]) -> str:
    """``data`` as TOML text; ``tomllib.loads`` of it gives ``data`` back (tuples as lists).

    Examples
    --------
    >>> print(toml_text({"name": "box", "devices": [{"name": "cpu", "streams": 2}],
    ...                  "calibration": {"format": "1"}}), end="")
    name = "box"
    <BLANKLINE>
    [calibration]
    format = "1"
    <BLANKLINE>
    [[devices]]
    name = "cpu"
    streams = 2
    """
    scalars = [(k, v) for k, v in data.items() if not _is_table(v) and not _is_table_array(v)]
    tables = [(k, v) for k, v in data.items() if _is_table(v)]
    arrays = [(k, v) for k, v in data.items() if _is_table_array(v)]
    lines = [f"{_key(k)} = {_value(v)}" for k, v in scalars]
    for k, v in tables:
        lines += ["", f"[{_key(k)}]", *(f"{_key(a)} = {_value(b)}" for a, b in v.items())]
    for k, rows in arrays:
        for row in rows:
            lines += ["", f"[[{_key(k)}]]", *(f"{_key(a)} = {_value(b)}" for a, b in row.items())]
    return "\n".join(lines) + "\n"


def _is_table(v: Any) -> bool:
    return isinstance(v, Mapping)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(x, Mapping) for x in v)
