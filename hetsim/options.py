"""Option sets that travel together: a frozen dataclass, checked once when it is made,
passed whole from the function a user calls down to the one that reads it, instead
of a dozen keywords written out at every hop.

:class:`KeywordOptions` is what every such set shares (:class:`sim.options.SimOptions`,
:class:`runtime.executor.options.ExecutionOptions`,
:class:`runtime.validation.options.ValidationOptions`): a function that takes one as
``options`` also takes its fields as keyword arguments, which set them on it.

Examples
--------
>>> from dataclasses import dataclass
>>> from hetsim.options import KeywordOptions
>>> @dataclass(frozen=True)
... class Knobs(KeywordOptions):
...     depth: int = 1
>>> Knobs.of(None, {"depth": 3}, "dig").depth
3
>>> Knobs().with_keywords({"width": 2}, "dig")
Traceback (most recent call last):
...
TypeError: dig() got an unexpected keyword argument 'width' (options: depth)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["KeywordOptions"]

Options = TypeVar("Options", bound="KeywordOptions")


class KeywordOptions:
    """A frozen dataclass of options that a function takes whole (``options=``) or
    field by field as keyword arguments."""

    def with_keywords(self: Options, keywords: Mapping[str, Any], caller: str) -> Options:
        """These options with ``keywords`` (option names, as ``caller`` took them) set;
        :class:`TypeError` naming a keyword that is no option."""
        if not keywords:
            return self
        names = self.option_names()
        unknown = sorted(set(keywords) - names)
        if unknown:
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r} "
                            f"(options: {', '.join(sorted(names))})")
        return dataclasses.replace(self, **keywords)  # type: ignore[type-var]

    @classmethod
    def of(cls: type[Options], options: Options | None, keywords: Mapping[str, Any], caller: str) -> Options:
        """``options`` (default: the defaults) with ``keywords`` set (:meth:`with_keywords`)."""
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"{caller}(): options must be {cls.__name__}, got {type(options).__name__}")
        return (options or cls()).with_keywords(keywords, caller)

    @classmethod
    def option_names(cls) -> frozenset[str]:
        """The names of the options (the dataclass's fields)."""
        return frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
