"""How a message becomes stored text, and back.

Everything here is pure and engine-agnostic: validating input, the compact JSON form we store,
provider-metadata sanitising (behaviour.md §2.2), reserved-key stripping (§2.3), cutting stored
text into row-sized slices on code-point boundaries (§3), and moving inline media out of a message
and back in (§4).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidMessage, InvalidMessageType
from .limits import check_message_keys, unsafe_to_spaces
from .messages._json_depth import (
    exceeds_depth,
    find_bad_value,
    loads_iterative,
    short_path,
    size_iterative,
)
from .messages._parts import DEFAULT_MEDIA_TYPE, compact_json, make_data_url, parse_data_url
from .model import Message, is_tool_type

ROW_BUDGET = 1536 * 1024
"""Most UTF-8 bytes of stored JSON one row holds; longer messages use continuation rows."""

POINTER_PREFIX = "attachment:sha256:"
"""Stored in place of an inline media payload, followed by the payload's SHA-256 in hex."""

MAX_ATTACHMENT_DEPTH = 8
"""How deep into ``parts`` the attachment walk looks (the parts list is depth 0)."""

_POINTER_RE = re.compile(r"attachment:sha256:[0-9a-f]{64}\Z")
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
    check_message_keys(msg["id"], msg.get("role"))  # id limits, role text (see _limits)
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


# --- sanitising (§2.2, §2.3) ------------------------------------------------------------------

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


# --- attachments (§4) -------------------------------------------------------------------------


@dataclass(frozen=True)
class Payload:
    """Decoded media moved out of a message, addressed by the SHA-256 of its bytes."""

    hash: str
    data: bytes
    media_type: str


def pointer_for(digest: str) -> str:
    """The pointer string stored in place of a payload."""
    return POINTER_PREFIX + digest


def is_pointer(value: object) -> bool:
    """True for a well-formed ``attachment:sha256:<64 hex>`` string."""
    return isinstance(value, str) and value.startswith(POINTER_PREFIX) and bool(
        _POINTER_RE.match(value)
    )


def _pointer_in(obj: dict[str, Any]) -> tuple[str, str, int] | None:
    """The reference an object holds: (field, hash, length of the kept ``data:`` header).

    A ``url`` is a reference when it is a pointer, or a base64 ``data:`` URL whose payload is a
    pointer: extraction stores ``url`` that way, so the header, and with it the media type the
    message wrote, stays in the message. A ``data`` field is a reference when it is a pointer.
    """
    for key in ("url", "data"):
        v = obj.get(key)
        if not isinstance(v, str):
            continue
        start = 0
        if key == "url" and v.startswith("data:"):
            parsed = parse_data_url(v)
            if parsed is None or not parsed.base64:
                continue
            start = parsed.comma + 1
        if v.startswith(POINTER_PREFIX, start) and _POINTER_RE.match(v, start):
            return key, v[start + len(POINTER_PREFIX) :], start
    return None


def _decode_base64(payload: str) -> bytes | None:
    """Decode base64 only when re-encoding gives back the same text, so reads stay lossless.

    Whitespace, missing padding or stray bits before the padding (``QR==`` decodes like
    ``QQ==``) would come back different, so such payloads are not extracted.
    """
    if len(payload) % 4 != 0 or not payload.isascii():
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(data) != payload.encode("ascii"):
        return None
    return data


def _carrier(obj: dict[str, Any]) -> tuple[str, bytes, str, str] | None:
    """If ``obj`` carries inline media: (field, decoded bytes, media type, text kept before the
    pointer). A ``data:`` URL keeps its header, so it reads back with the type it was written
    with, whatever type another message stored the same bytes with first."""
    url = obj.get("url")
    declared = obj.get("mediaType")
    if isinstance(url, str):
        parsed = parse_data_url(url)
        if parsed is None or not parsed.base64:
            return None
        header_type = parsed.media_type
        if isinstance(declared, str):
            if header_type != declared:
                return None  # the header could not be rebuilt from the part: keep it inline
            media_type = declared
        else:
            media_type = header_type or DEFAULT_MEDIA_TYPE
            if media_type != header_type:
                return None
        if media_type.startswith("text/"):
            return None
        data = _decode_base64(url[parsed.comma + 1 :])
        return None if data is None else ("url", data, media_type, url[: parsed.comma + 1])
    if isinstance(declared, str) and not declared.startswith("text/"):
        raw = obj.get("data")
        if isinstance(raw, str) and not is_pointer(raw):
            data = _decode_base64(raw)
            return None if data is None else ("data", data, declared, "")
    return None


def may_carry_media(text: str) -> bool:
    """Cheap test on a message's JSON text: could the attachment walk find anything in it?

    Every carrier has a ``"data:...`` URL or a ``"mediaType"`` key, and every stored reference
    is a pointer string, so text with none of them needs no walk.
    """
    return '"data:' in text or '"mediaType"' in text or POINTER_PREFIX in text


def extract_attachments(message: Message) -> tuple[Message, list[Payload], list[str]]:
    """Move inline media out of ``message["parts"]``.

    Returns the stored form (the input object itself when nothing changed), the payloads to store
    (distinct, in encounter order) and every hash the stored form points to, including pointers
    that were already there (a message written back keeps its reference).
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message, [], []
    payloads: dict[str, Payload] = {}
    pointers: dict[str, None] = {}
    new_parts = _extract_walk(parts, 0, payloads, pointers)
    if new_parts is parts:
        return message, [], list(pointers)
    out = dict(message)
    out["parts"] = new_parts
    return out, list(payloads.values()), list(pointers)


def _extract_walk(
    value: Any, depth: int, payloads: dict[str, Payload], pointers: dict[str, None]
) -> Any:
    if depth > MAX_ATTACHMENT_DEPTH:
        return value
    if isinstance(value, list):
        changed = False
        items = []
        for item in value:
            new = _extract_walk(item, depth + 1, payloads, pointers)
            changed = changed or new is not item
            items.append(new)
        return items if changed else value
    if isinstance(value, dict):
        ref = _pointer_in(value)
        if ref is not None:
            pointers.setdefault(ref[1], None)
            return value
        found = _carrier(value)
        if found is not None:
            field, data, media_type, header = found
            digest = hashlib.sha256(data).hexdigest()
            payloads.setdefault(digest, Payload(digest, data, media_type))
            pointers.setdefault(digest, None)
            out = dict(value)
            out[field] = header + pointer_for(digest)
            return out
        changed = False
        new_obj: dict[str, Any] = {}
        for k, v in value.items():
            new = _extract_walk(v, depth + 1, payloads, pointers)
            changed = changed or new is not v
            new_obj[k] = new
        return new_obj if changed else value
    return value


def pointer_hashes(message: Message) -> list[str]:
    """Every payload hash the stored form of ``message`` points to (same depth-limited walk)."""
    parts = message.get("parts")
    pointers: dict[str, None] = {}
    if isinstance(parts, list):
        _pointer_walk(parts, 0, pointers)
    return list(pointers)


def _pointer_walk(value: Any, depth: int, pointers: dict[str, None]) -> None:
    if depth > MAX_ATTACHMENT_DEPTH:
        return
    if isinstance(value, list):
        for item in value:
            _pointer_walk(item, depth + 1, pointers)
    elif isinstance(value, dict):
        ref = _pointer_in(value)
        if ref is not None:
            pointers.setdefault(ref[1], None)
            return
        for v in value.values():
            _pointer_walk(v, depth + 1, pointers)


def pointer_field(message: Message) -> str | None:
    """The path (``parts[1].url``) of the first payload reference in ``message``, or None.

    Untrusted input must not hold one: it would read back with bytes its writer never sent.
    """
    parts = message.get("parts")
    return _pointer_path(parts, 0, "parts") if isinstance(parts, list) else None


def _pointer_path(value: Any, depth: int, path: str) -> str | None:
    if depth > MAX_ATTACHMENT_DEPTH:
        return None
    if isinstance(value, list):
        items: Iterable[tuple[str, Any]] = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        ref = _pointer_in(value)
        if ref is not None:
            return f"{path}.{ref[0]}"
        items = ((f"{path}.{k}", v) for k, v in value.items())
    else:
        return None
    for sub, v in items:
        found = _pointer_path(v, depth + 1, sub)
        if found is not None:
            return found
    return None


def resolve_attachments(
    message: Message, lookup: Mapping[str, tuple[str, bytes]]
) -> Message:
    """Put payloads back where the stored form has pointers (the inverse of extraction).

    ``lookup`` maps a hash to ``(media_type, data)``; a pointer whose payload is missing stays.
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message
    new_parts = _resolve_walk(parts, 0, lookup)
    if new_parts is parts:
        return message
    out = dict(message)
    out["parts"] = new_parts
    return out


def _resolve_walk(value: Any, depth: int, lookup: Mapping[str, tuple[str, bytes]]) -> Any:
    if depth > MAX_ATTACHMENT_DEPTH:
        return value
    if isinstance(value, list):
        changed = False
        items = []
        for item in value:
            new = _resolve_walk(item, depth + 1, lookup)
            changed = changed or new is not item
            items.append(new)
        return items if changed else value
    if isinstance(value, dict):
        ref = _pointer_in(value)
        if ref is not None:
            key, digest, start = ref
            found = lookup.get(digest)
            if found is None:
                return value
            stored_type, data = found
            b64 = base64.b64encode(data).decode("ascii")
            out = dict(value)
            if start:  # the header the message was written with
                out[key] = value[key][:start] + b64
            elif key == "url":  # bare: the type the message declares, else the payload's
                declared = value.get("mediaType")
                media_type = declared if isinstance(declared, str) else stored_type
                out[key] = make_data_url(media_type, b64)
            else:
                out[key] = b64
            return out
        changed = False
        new_obj: dict[str, Any] = {}
        for k, v in value.items():
            new = _resolve_walk(v, depth + 1, lookup)
            changed = changed or new is not v
            new_obj[k] = new
        return new_obj if changed else value
    return value


def base64_len(byte_count: int) -> int:
    """Length of the base64 text of ``byte_count`` bytes: what a read of the payload costs."""
    return (byte_count + 2) // 3 * 4


def message_text(message: Message) -> str:
    """The searchable text of a message: its ``text`` parts joined by one space (§8.1).

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
