"""How a message becomes stored text, and back.

Everything here is pure and engine-agnostic: validating input, the compact JSON form we store,
provider-metadata sanitising, reserved-key stripping, and cutting stored text into row-sized
slices on code-point boundaries. Moving inline media out of a message and back in lives in
:mod:`convostore.attachments`; its public names are importable from here too, as before.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# Re-exported: these names were documented here before attachments had their own folder.
from .attachments import MAX_ATTACHMENT_DEPTH as MAX_ATTACHMENT_DEPTH
from .attachments import POINTER_PREFIX as POINTER_PREFIX
from .attachments import Payload as Payload
from .attachments import base64_len as base64_len
from .attachments import extract_attachments as extract_attachments
from .attachments import is_pointer as is_pointer
from .attachments import may_carry_media as may_carry_media
from .attachments import pointer_field as pointer_field
from .attachments import pointer_for as pointer_for
from .attachments import pointer_hashes as pointer_hashes
from .attachments import resolve_attachments as resolve_attachments
from .errors import InvalidMessage, InvalidMessageType
from .limits import check_message_keys, unsafe_to_spaces
from .messages._json_depth import (
    exceeds_depth,
    find_bad_value,
    loads_iterative,
    short_path,
    size_iterative,
)
from .messages._parts import compact_json
from .model import Message, is_tool_type

ROW_BUDGET = 1536 * 1024
"""Most UTF-8 bytes of stored JSON one row holds; longer messages use continuation rows."""

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


# --- validation and JSON text ----------------------------------------------------------------


def new_message_id() -> str:
    """A fresh random message id."""
    return uuid.uuid4().hex


def validate_message(message: object) -> Message:
    """Check the shape of an incoming message and return it as a ``dict``.

    A missing ``id`` is generated (the returned dict is then a copy). Raises
    :class:`InvalidMessageType` when the message is not a mapping, ``id`` or ``role`` is not a
    string, or ``parts`` is not a list; :class:`InvalidMessage` for an id or role the store
    cannot hold (empty id, NUL, lone surrogate, id over the length limit: see
    :mod:`convostore.limits`).
    """
    if not isinstance(message, Mapping):
        raise InvalidMessageType("message", f"expected a mapping, got {type(message).__name__}")
    msg: Message = message if isinstance(message, dict) else dict(message)
    if "id" not in msg or msg["id"] is None:
        msg = {"id": new_message_id(), **{k: v for k, v in msg.items() if k != "id"}}
    check_message_keys(msg["id"], msg.get("role"))  # id limits, role text (see limits.py)
    if "parts" not in msg:
        raise InvalidMessageType("parts", "missing; expected a list")
    if not isinstance(msg["parts"], list):
        raise InvalidMessageType("parts", f"expected a list, got {type(msg['parts']).__name__}")
    return msg


MAX_JSON_DEPTH = 128
"""Deepest nesting a stored message may have: the message object is level 1, its ``parts`` list
level 2, a part level 3. Deeper messages are refused with :class:`InvalidMessage`.

Python's JSON encoder and decoder spend one level of the call stack per level of nesting, so
the bound leaves most of the stack (about 1,000 levels) to the caller: a message the store
accepted reads back from a call stack hundreds of frames deep. (Rows nested deeper, written
before the bound, still read back: :func:`loads` decodes them without recursion.)"""


def dumps(value: Any, *, ascii_first: bool = False) -> str:
    """The stored text of a JSON value: compact, UTF-8, keys in their order.

    A lone surrogate is written as its ``\\uXXXX`` escape so the text is valid UTF-8 and reads
    back as the same string. Raises :class:`InvalidMessage` naming the first field JSON cannot
    hold (NaN, infinity, bytes, sets, arbitrary objects, keys JSON has no text for such as
    tuples, a container that holds itself, an integer longer than Python writes as text).

    As in :mod:`json`, an ``int``, ``float``, ``bool`` or ``None`` key is written as a string
    (``{1: "a"}`` reads back as ``{"1": "a"}``) and a tuple as a list: telling them apart would
    take a walk of every message on every append.

    ``ascii_first`` is a speed hint for values likely to be ASCII (see
    :func:`~convostore.messages._parts.compact_json`); the text is the same.
    """
    try:
        # A container that holds itself ends in RecursionError; find_bad_value names it.
        text = compact_json(value, ascii_first=ascii_first)
    except (TypeError, ValueError, RecursionError) as exc:
        field, problem = find_bad_value(value, MAX_JSON_DEPTH)
        if not problem:  # nothing wrong with the value: the caller's stack was too deep
            problem = f"could not be encoded as JSON here ({type(exc).__name__}: {exc})"
        raise InvalidMessage(short_path(field or "message"), problem) from exc
    return text if text.isascii() else escape_lone_surrogates(text)


def check_depth(message: Message, text: str) -> None:
    """Refuse a message (stored as ``text``) that nests deeper than :data:`MAX_JSON_DEPTH`.

    Cheapest test first: a message whose parts hold no container nests 3 levels, whatever its
    text says; otherwise the text is measured in C
    (:func:`~convostore.messages._json_depth.exceeds_depth`).

    :raises InvalidMessage: naming the first field that is too deep (its path shortened).
    """
    if not _shallow(message) and exceeds_depth(text, MAX_JSON_DEPTH):
        field, problem = find_bad_value(message, MAX_JSON_DEPTH)
        raise InvalidMessage(
            short_path(field or "message"),
            problem or f"nested more than {MAX_JSON_DEPTH} levels deep",
        )


def _shallow(message: Message) -> bool:
    """Does no value of the message (besides its ``parts`` list) or of its parts hold a
    container? Most messages are text parts: this answers them without reading the text."""
    for key, value in message.items():
        if isinstance(value, (dict, list, tuple)):  # a tuple is written as a list
            if key != "parts" or not isinstance(value, list):
                return False
            for part in value:
                if isinstance(part, dict):
                    for item in part.values():
                        if isinstance(item, (dict, list, tuple)):
                            return False
                elif isinstance(part, (list, tuple)):
                    return False
    return True


def stored_size(message: Message) -> int:
    """UTF-8 bytes of the stored text of a message read back (:func:`dumps`), never failing:
    a message nested deeper than the call stack allows (a row written before
    :data:`MAX_JSON_DEPTH`) is measured without recursion."""
    try:
        return utf8_len(dumps(message))
    except InvalidMessage:
        return size_iterative(message, lambda v: utf8_len(dumps(v)))


def escape_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\uXXXX`` escape, as JavaScript's
    ``JSON.stringify`` writes it (Python's encoder leaves it raw, which UTF-8 cannot hold)."""
    if not text.isascii() and _SURROGATE_RE.search(text):
        return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


_TOOL_VALUES = ("input", "output", "result")
_HOLE = "convostore:hole:b5e0c2:"
"""Stands in a tool part for its input or output while the rest of a message is encoded (see
:func:`dumps_message`); a message that holds the text itself is encoded the slow way."""
_HOLE_MIN = 1024
"""Characters of JSON text a message's tool inputs and outputs must reach before
:func:`dumps_message` encodes the message around them: below it, the values are encoded a
second time within the whole message, which costs less than cutting and joining the text
(an agent turn's tool steps usually carry string outputs and an input such as ``{"path":...}``:
that cut and join copied the whole 12 KB message for a 15-character input)."""


def dumps_message(message: Message) -> tuple[str, dict[int, str]]:
    """:func:`dumps` of a message, plus the JSON text of each tool part's input and output.

    The text is exactly ``dumps(message)``, composed so that the pieces the token estimate
    needs (``id(value) -> text``) are encoded once, not twice: the message is encoded with a
    placeholder string in place of each such value (one call of the C encoder), and the
    values' texts are put in the placeholders' places; values of less than :data:`_HOLE_MIN`
    characters in all are simply encoded again with the message.
    """
    parts = message.get("parts")
    if not isinstance(parts, list) or not any(
        isinstance(p, dict) and is_tool_type(p.get("type")) for p in parts
    ):
        text = dumps(message, ascii_first=_likely_ascii(parts))
        check_depth(message, text)
        return text, {}
    ascii_first = _likely_ascii(parts)
    values: list[Any] = []
    holed: list[Any] = []
    for part in parts:
        if isinstance(part, dict) and is_tool_type(part.get("type")):
            copy: dict[Any, Any] | None = None
            for key, value in part.items():
                if key in _TOOL_VALUES and isinstance(value, (dict, list)):
                    if copy is None:
                        copy = dict(part)
                    copy[key] = f"{_HOLE}{len(values)}"
                    values.append(value)
            holed.append(part if copy is None else copy)
        else:
            holed.append(part)
    try:
        texts = [dumps(value, ascii_first=ascii_first) for value in values]
        if sum(map(len, texts)) < _HOLE_MIN:  # small values: encoded twice, the text left whole
            text = dumps(message, ascii_first=ascii_first)
            check_depth(message, text)
            return text, {id(v): t for v, t in zip(values, texts, strict=True)}
        skeleton = dumps({**message, "parts": holed}, ascii_first=ascii_first)
    except InvalidMessage:
        dumps(message)  # encode the whole message again: it raises, naming the field
        raise
    pieces = skeleton.split('"' + _HOLE)
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        tag = f'{i}"'
        if i >= len(texts) or not piece.startswith(tag):
            break
        out.append(texts[i])
        out.append(piece[len(tag):])
    else:
        if len(pieces) == len(texts) + 1:
            text = "".join(out)
            check_depth(message, text)
            return text, {id(v): t for v, t in zip(values, texts, strict=True)}
    # The placeholder's text occurs in the message itself: encode it whole
    text = dumps(message, ascii_first=ascii_first)
    check_depth(message, text)
    return text, {}


def _likely_ascii(parts: object) -> bool:
    """A hint for the encoder: are the texts of the parts (``text``, a string ``output``)
    ASCII? ``str.isascii`` reads a flag of the string, so this costs no scan."""
    if not isinstance(parts, list):
        return True
    for part in parts:
        if type(part) is dict:
            for key in ("text", "output"):
                value = part.get(key)
                if type(value) is str and not value.isascii():
                    return False
    return True


_DECODER: Any = json.JSONDecoder()
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once
"""The JSON decoder's value scanner: ``(value, end)`` of the value at an index."""


def loads(text: str) -> Any:
    """Parse stored text (the inverse of :func:`dumps`), from any call depth.

    When the C decoder runs out of call stack (deep nesting, or a caller deep in its own
    recursion), the text is decoded again without recursion.

    :raises ValueError: the text is not JSON.
    """
    try:
        # The decoder's scanner straight away: stored text is compact, so it ends where the
        # value ends; anything else (whitespace, trailing data, not JSON) goes to json.loads,
        # which decodes or raises as usual.
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
        return json.loads(text)
    except StopIteration:
        return json.loads(text)
    except RecursionError:
        return loads_iterative(text)


def utf8_len(text: str) -> int:
    """UTF-8 length of stored text (which :func:`dumps` guarantees encodable)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def split_content(text: str, budget: int = ROW_BUDGET) -> list[str]:
    """Cut stored text into slices of at most ``budget`` UTF-8 bytes, on code-point boundaries.

    ``""`` gives ``[""]``; joining the slices gives back ``text`` exactly.
    """
    if text.isascii():
        if len(text) <= budget:
            return [text]
        return [text[i : i + budget] for i in range(0, len(text), budget)]
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= budget:
        return [text]
    slices: list[str] = []
    pos, n = 0, len(data)
    while pos < n:
        end = min(pos + budget, n)
        while end < n and (data[end] & 0xC0) == 0x80:
            end -= 1
        slices.append(data[pos:end].decode("utf-8", "surrogatepass"))
        pos = end
    return slices


# --- sanitising -------------------------------------------------------------------------------

_OPENAI_DROPPED = ("itemId", "reasoningEncryptedContent")


def sanitize_message(message: Message) -> Message:
    """Drop OpenAI item ids and encrypted reasoning from part metadata, and blank reasoning parts.

    Returns a new message with a new ``parts`` list; the input is not changed.
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message
    new_parts: list[Any] = []
    for part in parts:
        if isinstance(part, dict):
            part = _sanitize_part(part)
            if part is None:
                continue
        new_parts.append(part)
    out = dict(message)
    out["parts"] = new_parts
    return out


def _sanitize_part(part: dict[str, Any]) -> dict[str, Any] | None:
    for key in ("providerMetadata", "callProviderMetadata"):
        meta = part.get(key)
        if isinstance(meta, dict) and isinstance(meta.get("openai"), dict):
            openai = meta["openai"]
            if any(k in openai for k in _OPENAI_DROPPED):
                openai = {k: v for k, v in openai.items() if k not in _OPENAI_DROPPED}
                meta = dict(meta)
                if openai:
                    meta["openai"] = openai
                else:
                    del meta["openai"]
                part = dict(part)
                if meta:
                    part[key] = meta
                else:
                    del part[key]
    if part.get("type") == "reasoning":
        text = part.get("text")
        meta = part.get("providerMetadata")
        blank = not isinstance(text, str) or not text.strip()
        if blank and (meta is None or (isinstance(meta, dict) and not meta)):
            return None
    return part


def strip_reserved_metadata(message: Message, keys: Iterable[str]) -> Message:
    """Remove reserved keys from ``message["metadata"]`` (for untrusted, client-sourced writes).

    The message is returned unchanged when none is present; an emptied ``metadata`` is removed.
    """
    meta = message.get("metadata")
    if not isinstance(meta, dict):
        return message
    present = [k for k in keys if k in meta]
    if not present:
        return message
    meta = {k: v for k, v in meta.items() if k not in present}
    out = dict(message)
    if meta:
        out["metadata"] = meta
    else:
        del out["metadata"]
    return out



def message_text(message: Message) -> str:
    """The searchable text of a message: its ``text`` parts joined by one space.

    NUL and lone surrogates become spaces: no engine's index can hold them, and a search query
    treats them as word separators too."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    texts = [
        p.get("text") if isinstance(p.get("text"), str) else ""
        for p in parts
        if isinstance(p, dict) and p.get("type") == "text"
    ]
    text = " ".join(t for t in texts if t)
    return unsafe_to_spaces(text)


def is_valid_stored(value: object) -> bool:
    """A stored row is readable when it parses to an object with str id, str role, list parts."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("role"), str)
        and isinstance(value.get("parts"), list)
    )
