"""Inline media moved out of a message and back in, addressed by the SHA-256 of its bytes.

A part that carries base64 media (a ``data:`` URL, or ``data`` with a non-text ``mediaType``)
is stored with a pointer string in its place; the bytes are stored once per hash, however many
messages carry them, and put back when the message is read. Pure and engine-agnostic: the
engines store and look up the payloads.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..messages._parts import DEFAULT_MEDIA_TYPE, make_data_url, parse_data_url
from ..model import Message

POINTER_PREFIX = "attachment:sha256:"
"""Stored in place of an inline media payload, followed by the payload's SHA-256 in hex."""

MAX_ATTACHMENT_DEPTH = 8
"""How deep into ``parts`` the attachment walk looks (the parts list is depth 0)."""

_POINTER_RE = re.compile(r"attachment:sha256:[0-9a-f]{64}\Z")


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
