"""Facts about messages and their parts that several modules need, each written once.

- :func:`compact_json`: the compact JSON text convostore writes everywhere (stored rows, token
  estimates, tool arguments, summary prompts).
- :func:`parse_data_url`, :func:`base64_data_url`, :func:`data_url_media_type`,
  :func:`make_data_url`: how a ``data:`` URL is split into its header and payload.
- :func:`tool_name`: the name of the tool a part calls.
- :func:`parts`: the parts of a message, whatever the message holds.

Nothing here validates or raises on odd input (except :func:`compact_json`, on values JSON
cannot hold): callers that want a different presentation adapt the result where they use it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_MEDIA_TYPE",
    "DataURL",
    "base64_data_url",
    "compact_json",
    "data_url_media_type",
    "make_data_url",
    "parse_data_url",
    "parts",
    "tool_name",
]

DEFAULT_MEDIA_TYPE = "application/octet-stream"
"""The media type of bytes whose type nobody named."""

# One encoder per variant: json.dumps with non-default options builds a new one on every call.
# No circular-reference bookkeeping: a container that holds itself ends in RecursionError.
_STRICT = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)
_ALLOW_NAN = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)
# The C encoder writes ASCII-only output faster (into a one-byte buffer): see compact_json.
_STRICT_ASCII = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=True, allow_nan=False, check_circular=False
)


def compact_json(value: Any, *, allow_nan: bool = False, ascii_first: bool = False) -> str:
    """The compact JSON text of a value: ``separators=(",", ":")``, ``ensure_ascii=False``.

    Keys keep their order; non-ASCII text is written as it is, and so is a lone surrogate (the
    stored form escapes it afterwards: :func:`convostore.codec.dumps`).

    :param value: any JSON-like value.
    :param allow_nan: write NaN and the infinities as ``NaN``/``Infinity`` instead of refusing
        them (for text that is only measured or shown, never parsed back).
    :param ascii_first: a speed hint for values that are likely ASCII (the text is the same):
        encode with ``ensure_ascii=True`` first, which the C encoder does about a third
        faster, and keep that text unless it holds a ``\\u`` escape (the only way the two
        forms differ: a character beyond ASCII, DEL or a control character); then encode again
        the ordinary way. Not with ``allow_nan``.
    :raises TypeError: a value JSON has no text for (bytes, sets, objects, tuple keys...).
    :raises ValueError: NaN or an infinity, unless ``allow_nan``.
    :raises RecursionError: nesting deeper than Python's recursion limit, or a container that
        holds itself.
    """
    if allow_nan:
        return _ALLOW_NAN.encode(value)
    if ascii_first:
        text = _STRICT_ASCII.encode(value)
        # "\\" first: a one-character search, and most texts hold no backslash at all
        if "\\" not in text or "\\u" not in text:
            return text
    return _STRICT.encode(value)


# --- data URLs --------------------------------------------------------------------------------

_DATA = "data:"
_BASE64 = ";base64"


class DataURL(NamedTuple):
    """The header of a ``data:`` URL; the payload itself is not copied (it may be huge)."""

    media_type: str
    """The media type as the header writes it, ``;base64`` removed (may be empty)."""
    base64: bool
    """Whether the header ends in ``;base64``."""
    comma: int
    """Index of the comma that ends the header: the payload is ``url[comma + 1:]``."""


def parse_data_url(url: str) -> DataURL | None:
    """The header of a ``data:`` URL, or None for another URL or one without a comma."""
    if not url.startswith(_DATA):
        return None
    comma = url.find(",")
    if comma < 0:
        return None
    header = url[len(_DATA) : comma]
    if header.endswith(_BASE64):
        return DataURL(header[: -len(_BASE64)], True, comma)
    return DataURL(header, False, comma)


def base64_data_url(url: str) -> tuple[str, str] | None:
    """(media type as written, base64 payload) of a base64 ``data:`` URL, else None."""
    parsed = parse_data_url(url)
    if parsed is None or not parsed.base64:
        return None
    return parsed.media_type, url[parsed.comma + 1 :]


def data_url_media_type(url: str) -> str:
    """The media type a ``data:`` URL names, :data:`DEFAULT_MEDIA_TYPE` when it names none.

    A URL without a comma is read as all header.
    """
    comma = url.find(",")
    header = url[len(_DATA) : comma] if comma >= 0 else url[len(_DATA) :]
    if header.endswith(_BASE64):
        header = header[: -len(_BASE64)]
    return header or DEFAULT_MEDIA_TYPE


def make_data_url(media_type: str, payload: str) -> str:
    """The base64 ``data:`` URL of a payload (already base64 text) of a media type."""
    return f"{_DATA}{media_type}{_BASE64},{payload}"


# --- tool parts and message parts -------------------------------------------------------------


def tool_name(part: Mapping[str, Any], *, field_first: bool = False) -> str | None:
    """The name of the tool a part calls, or None when the part names none.

    As the AI SDK reads it: what follows ``tool-`` in a ``tool-<name>`` type (possibly empty),
    else the ``toolName`` field when it is a string (``dynamic-tool`` parts). Callers that show
    a name pick their own placeholder for None (``tool_name(p) or "unknown"``).

    :param field_first: read a non-empty ``toolName`` first, as the compaction prompt and the
        context tools do: the ``tool-result`` stubs that
        :func:`convostore.compaction.sanitize_tool_pairs` writes carry the real name there.
    """
    name = part.get("toolName")
    if field_first and isinstance(name, str) and name:
        return name
    kind = part.get("type")
    if isinstance(kind, str) and kind.startswith("tool-"):
        return kind[len("tool-") :]
    return name if isinstance(name, str) else None


def parts(message: Mapping[str, Any]) -> Sequence[Any]:
    """A message's ``parts`` list itself, or an empty sequence when it holds no list.

    Elements are not checked: a part may be any value in a message nobody validated.
    """
    value = message.get("parts")
    return value if isinstance(value, list) else ()
