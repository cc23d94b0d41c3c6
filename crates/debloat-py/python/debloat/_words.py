"""Keyword arguments to the command line's words.

``debloat.sim("rrul", link="20Mbit/2Mbit", qdisc_up="cake", ecn=True, rtts=["10ms", "50ms"])``
becomes ``rrul --link 20Mbit/2Mbit --qdisc-up cake --ecn --rtts 10ms,50ms``: an underscore is a
hyphen, ``True`` is a bare flag, ``False`` and ``None`` are left out, a list or tuple is joined
with commas (as the CLI's list options take it), anything else is ``str()`` of it. The words
then go to the very parser the ``debloat`` binary uses, so an unknown or misspelt keyword gets
clap's message, with its suggestion.
"""

from __future__ import annotations

import os
from typing import Any, Mapping


def value_word(v: Any) -> str:
    """One value as the CLI reads it."""
    if isinstance(v, (list, tuple)):
        return ",".join(value_word(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    return str(v)


def words(positional: list[str], options: Mapping[str, Any]) -> list[str]:
    """The argument list for ``positional`` then ``options``."""
    out = [str(p) for p in positional if p is not None]
    for key, v in options.items():
        if v is None or v is False:
            continue
        flag = "--" + key.replace("_", "-")
        if v is True:
            out.append(flag)
        else:
            out.extend([flag, value_word(v)])
    return out
