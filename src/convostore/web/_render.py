"""How the viewer shows stored values: the templates' filters and the part classifier.

Every stored string is data. Templates autoescape; the one function here that returns markup,
:func:`highlight`, escapes each piece of the text first and only then wraps the hits in
``<mark>``, so no stored character can open a tag or an attribute. URLs become links only when
they are ``http:`` or ``https:`` (:func:`safe_href`); a ``javascript:`` or ``data:`` URL is
shown as text.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from markupsafe import Markup, escape

from ..cli._text import size as _size
from ..cli._text import when as _when
from ..messages._parts import parts, tool_name
from ..model import Message, is_tool_type
from ._data import has_payload

__all__ = [
    "INLINE_IMAGE_TYPES",
    "PartView",
    "anchor",
    "highlight",
    "is_inline_image",
    "iso",
    "pretty_json",
    "role_class",
    "safe_href",
    "size",
    "view_part",
    "view_parts",
    "when",
]

INLINE_IMAGE_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"}
)
"""Media types shown inline (raster formats a browser cannot run script from); any other
file, SVG and HTML included, is only downloadable."""

SNIPPET = 240
"""Characters of a search hit's text shown around its first match."""

_ROLES = frozenset({"user", "assistant", "system", "tool"})
_WORD = re.compile(r"\w+")


def size(n: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 KiB``."""
    return _size(n)


def when(ms: int | None) -> str:
    """Epoch milliseconds as ``2023-11-14 22:13:20 UTC``; empty for None."""
    return "" if ms is None else _when(ms)


def iso(ms: int | None) -> str:
    """Epoch milliseconds in UTC ISO 8601 to the second, ``2023-11-14T22:13:20Z``; empty for
    None; a value no date can show as :func:`when` shows it."""
    if ms is None:
        return ""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return _when(ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def role_class(role: object) -> str:
    """A CSS class for a message role: the role itself when it is a known one, else ``other``."""
    return f"role-{role}" if isinstance(role, str) and role in _ROLES else "role-other"


def anchor(message_id: str) -> str:
    """The URL fragment of a message's element (``#m-`` and the percent-encoded id)."""
    return "#m-" + urllib.parse.quote(message_id, safe="")


def safe_href(url: object) -> str | None:
    """``url`` when it is an ``http:``/``https:`` URL a link may point to, else None."""
    if not isinstance(url, str):
        return None
    scheme = urllib.parse.urlsplit(url.strip()).scheme.lower()
    return url.strip() if scheme in ("http", "https") else None


def pretty_json(value: Any) -> str:
    """A JSON value indented for reading (non-finite numbers written as JavaScript does)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def is_inline_image(media_type: str) -> bool:
    """Is a file of this media type shown inline (see :data:`INLINE_IMAGE_TYPES`)?"""
    return media_type.split(";", 1)[0].strip().lower() in INLINE_IMAGE_TYPES


def highlight(text: str, query: str, width: int = SNIPPET) -> Markup:
    """A snippet of ``text`` around the first word of ``query`` it holds, every word of
    ``query`` marked. Each piece of text is escaped before the marks are put around it."""
    words = sorted({w.lower() for w in _WORD.findall(query)}, key=len, reverse=True)
    pattern = (re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
               if words else None)
    first = pattern.search(text) if pattern is not None else None
    start = 0 if first is None else max(0, first.start() - width // 3)
    snippet = text[start : start + width]
    pieces: list[Markup] = [Markup("…") if start else Markup("")]
    cursor = 0
    if pattern is not None:
        for hit in pattern.finditer(snippet):
            pieces.append(escape(snippet[cursor : hit.start()]))
            pieces.append(Markup("<mark>") + escape(hit.group()) + Markup("</mark>"))
            cursor = hit.end()
    pieces.append(escape(snippet[cursor:]))
    if start + width < len(text):
        pieces.append(Markup("…"))
    return Markup("").join(pieces)


@dataclass(frozen=True)
class PartView:
    """A message part classified for its template block."""

    kind: str
    """``text``, ``reasoning``, ``tool``, ``file``, ``source``, ``step``, ``data`` or ``other``."""
    part: Any
    index: int
    title: str = ""
    """The tool name, the file name, the data part's type."""
    media_type: str = ""
    downloadable: bool = False
    inline: bool = False
    """A file shown as an image."""


def _text(part: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = part.get(key)
        if isinstance(value, str):
            return value
    return ""


def view_parts(message: Message) -> list[PartView]:
    """The parts of a message, classified (none when it holds no list of parts)."""
    return [view_part(p, i) for i, p in enumerate(parts(message))]


def view_part(part: Any, index: int) -> PartView:
    """Classify one part of a message for display."""
    if not isinstance(part, dict):
        return PartView("other", part, index)
    kind = part.get("type")
    if kind == "text":
        return PartView("text", part, index)
    if kind == "reasoning":
        return PartView("reasoning", part, index)
    if is_tool_type(kind):
        return PartView("tool", part, index, tool_name(part) or "?")
    if kind == "file":
        media_type = _text(part, "mediaType").strip().lower()
        downloadable = has_payload(part)
        return PartView("file", part, index, _text(part, "filename", "name"), media_type,
                        downloadable, downloadable and is_inline_image(media_type))
    if kind == "source-url":
        return PartView("source", part, index, _text(part, "title"))
    if kind == "step-start":
        return PartView("step", part, index)
    if isinstance(kind, str) and kind.startswith("data-"):
        return PartView("data", part, index, kind)
    return PartView("other", part, index, kind if isinstance(kind, str) else "")
