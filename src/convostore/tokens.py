"""Token estimates: cheap heuristics that decide when to compact and what to keep.

A real tokenizer is slow to load and large in memory, so by default convostore estimates: a string
costs the larger of one token per four UTF-16 code units and 1.3 tokens per whitespace-separated
word, a message costs four tokens of framing plus its parts, and an inline attachment costs a flat
1,600 tokens for an image or one token per four bytes (at most 20,000) for anything else. The
formulas are those of the reference, so stamped estimates mean the same thing
whichever implementation wrote them.

Every function that counts strings takes an optional :data:`TokenCounter`, a plain ``str -> int``
callable that replaces :func:`estimate_string_tokens` wherever a string is counted, for example
``lambda s: len(encoding.encode(s))`` with tiktoken. The framing and attachment charges stay.

These functions run on every append, and a message can be megabytes long: each part is
serialised at most once, and a data URL is measured without being copied.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .codec import escape_lone_surrogates
from .messages._parts import DEFAULT_MEDIA_TYPE, DataURL, compact_json, parse_data_url
from .model import Message, is_tool_type

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_ATTACHMENT_TOKENS",
    "MAX_ATTACHMENT_TOKENS",
    "TOKENS_PER_MESSAGE",
    "WORDS_TOKEN_MULTIPLIER",
    "TokenCounter",
    "estimate_attachment_tokens",
    "estimate_message_tokens",
    "estimate_row_tokens",
    "estimate_string_tokens",
    "estimate_value_tokens",
]

TokenCounter = Callable[[str], int]
"""A custom string token counter, e.g. ``lambda s: len(enc.encode(s))``.

When passed to an estimate function it replaces :func:`estimate_string_tokens` for every string
that function counts; it is called once per string (non-string values are counted through their
compact JSON text).
"""

CHARS_PER_TOKEN = 4
"""UTF-16 code units per token in the character-based estimate."""

WORDS_TOKEN_MULTIPLIER = 1.3
"""Tokens per whitespace-separated word in the word-based estimate."""

TOKENS_PER_MESSAGE = 4
"""Framing tokens charged for every message (role, separators)."""

IMAGE_ATTACHMENT_TOKENS = 1_600
"""Flat charge for an ``image/*`` attachment."""

MAX_ATTACHMENT_TOKENS = 20_000
"""Ceiling of the bytes/4 charge for any other attachment."""


# What str.split() splits an ASCII string on, the space apart (it is counted unconditionally).
_ASCII_WHITESPACE_BUT_SPACE = "\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _utf16_length(s: str) -> int:
    # A code point above U+FFFF is a surrogate pair (2 units) in UTF-16, as in JavaScript's
    # ``.length``; "surrogatepass" lets a lone surrogate through as the 1 unit it is.
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) >> 1


def estimate_string_tokens(s: str) -> int:
    """Estimate the tokens of a string: ``ceil(max(utf16_length / 4, words * 1.3))``.

    ``utf16_length`` counts UTF-16 code units (a character above U+FFFF counts 2), ``words`` is
    the number of pieces ``str.split()`` finds. The empty string costs 0.

    :param s: the text to measure.
    :return: the estimate, a non-negative integer.
    """
    if not s:
        return 0
    chars = _utf16_length(s) / CHARS_PER_TOKEN
    if s.isascii():
        # Words are at most whitespace characters + 1; when even that bound cannot win, the
        # answer is the character count and the (costly) split is skipped.
        # ``c in s`` is a memchr, far cheaper than a count: only characters present are counted.
        spaces = s.count(" ")
        for c in _ASCII_WHITESPACE_BUT_SPACE:
            if c in s:
                spaces += s.count(c)
        if (spaces + 1) * WORDS_TOKEN_MULTIPLIER <= chars:
            return math.ceil(chars)
    words = len(s.split()) * WORDS_TOKEN_MULTIPLIER
    return math.ceil(chars if chars > words else words)


def _json_text_tokens(s: str) -> int:
    """:func:`estimate_string_tokens` of compact JSON text made by a ``json`` encoder.

    The encoder escapes every control character, so the space is the only ASCII whitespace such
    text holds raw: counting spaces is enough for the shortcut (a tool output is mostly JSON).
    """
    if s.isascii():
        chars = len(s) / CHARS_PER_TOKEN
        if (s.count(" ") + 1) * WORDS_TOKEN_MULTIPLIER <= chars:
            return math.ceil(chars)
    return estimate_string_tokens(s)


def estimate_value_tokens(
    value: object,
    token_counter: TokenCounter | None = None,
    encoded: Mapping[int, str] | None = None,
) -> int:
    """Estimate the tokens of any part field: a string, ``None`` or a JSON-like value.

    ``None`` costs 0, a string is counted as it is, anything else through its compact JSON text
    (``separators=(",", ":")``, ``ensure_ascii=False``, a lone surrogate as its ``\\uXXXX``
    escape, as stored), or ``str(value)`` when it is not JSON.

    :param value: the value to measure (a tool input or output, a text field...).
    :param token_counter: counts a string instead of :func:`estimate_string_tokens`.
    :param encoded: JSON texts already made, by ``id()`` of the value (see
        :func:`convostore.codec.dumps_message`), so a value is not encoded twice.
    :return: the estimate.
    """
    if value is None:
        return 0
    if isinstance(value, str):
        return estimate_string_tokens(value) if token_counter is None else token_counter(value)
    text = None if encoded is None else encoded.get(id(value))
    if text is None:
        try:
            # NaN is written as ``NaN``: this text is only measured, never parsed back.
            text = escape_lone_surrogates(compact_json(value, allow_nan=True))
        except (TypeError, ValueError, RecursionError):
            text = str(value)  # not JSON: counted as a plain string
            return estimate_string_tokens(text) if token_counter is None else token_counter(text)
    return _json_text_tokens(text) if token_counter is None else token_counter(text)


def estimate_message_tokens(
    messages: Iterable[Message],
    token_counter: TokenCounter | None = None,
    encoded: Mapping[int, str] | None = None,
) -> int:
    """Estimate the tokens of messages from their text, reasoning and tool parts.

    Each message costs 4 tokens of framing, plus for each part:

    - ``text`` and ``reasoning``: ``text`` (or ``reasoning`` when ``text`` is missing or None);
    - a tool part (``tool-<name>`` or ``dynamic-tool``): ``input`` plus ``output`` (or
      ``result`` when ``output`` is missing or None);
    - any other part: ``text`` if the key is present, else ``result`` if present, else nothing
      (so ``file`` parts cost 0 here; see :func:`estimate_row_tokens`).

    Each field is counted with :func:`estimate_value_tokens`. Metadata is not counted.

    :param messages: UIMessage-shaped dicts.
    :param token_counter: counts each string instead of :func:`estimate_string_tokens`.
    :param encoded: JSON texts of tool inputs and outputs already made, by ``id()``.
    :return: the estimate.
    """
    total = 0
    for message in messages:
        total += TOKENS_PER_MESSAGE
        parts = message.get("parts")
        if not parts:
            continue
        for part in parts:
            if not isinstance(part, dict):
                continue
            part_type = part.get("type")
            if part_type == "text" or part_type == "reasoning":
                value = part.get("text")
                if value is None:
                    value = part.get("reasoning")
                total += estimate_value_tokens(value, token_counter)
            elif is_tool_type(part_type):
                total += estimate_value_tokens(part.get("input"), token_counter, encoded)
                output = part.get("output")
                if output is None:
                    output = part.get("result")
                total += estimate_value_tokens(output, token_counter, encoded)
            elif "text" in part:
                total += estimate_value_tokens(part["text"], token_counter)
            elif "result" in part:
                total += estimate_value_tokens(part["result"], token_counter)
    return total


def estimate_attachment_tokens(media_type: str, byte_count: int) -> int:
    """Estimate the tokens of one attachment, so that media never counts as zero.

    An ``image/*`` attachment costs a flat 1,600 tokens; anything else ``ceil(bytes / 4)``,
    at most 20,000.

    :param media_type: the attachment's media type, e.g. ``image/png``.
    :param byte_count: its decoded size in bytes.
    :return: the estimate.
    """
    if media_type.startswith("image/"):
        return IMAGE_ATTACHMENT_TOKENS
    return min(-(-byte_count // 4), MAX_ATTACHMENT_TOKENS)


def _data_url_bytes(header: DataURL | None, url: str) -> int:
    # Decoded size of a data URL's payload, measured without slicing the (possibly huge) string.
    if header is None:
        return 0  # no comma: no payload
    payload_length = len(url) - header.comma - 1
    if header.base64:
        return payload_length * 3 // 4
    return payload_length


def estimate_row_tokens(
    message: Message,
    token_counter: TokenCounter | None = None,
    encoded: Mapping[int, str] | None = None,
) -> int:
    """Estimate the tokens stamped on a stored row: the message plus its inline attachments.

    This is :func:`estimate_message_tokens` of the single message, plus, for each top-level
    ``file`` part whose ``url`` is a ``data:`` URL, :func:`estimate_attachment_tokens` of its
    ``mediaType`` (default ``application/octet-stream``) and its approximate decoded size:
    ``floor(payload_length * 3 / 4)`` when the header ends in ``;base64``, else the payload
    length (the payload is what follows the first comma; a URL without a comma has none).
    Media nested inside tool outputs is counted through the JSON of the output instead.

    :param message: the prepared message, attachments still inline.
    :param token_counter: counts each string instead of :func:`estimate_string_tokens`.
    :param encoded: JSON texts of tool inputs and outputs already made, by ``id()``.
    :return: the estimate.
    """
    total = estimate_message_tokens((message,), token_counter, encoded)
    parts = message.get("parts")
    if not parts:
        return total
    for part in parts:
        if not isinstance(part, dict) or part.get("type") != "file":
            continue
        url: Any = part.get("url")
        if not isinstance(url, str) or not url.startswith("data:"):
            continue
        media_type = part.get("mediaType")
        if not isinstance(media_type, str):
            media_type = DEFAULT_MEDIA_TYPE
        total += estimate_attachment_tokens(media_type, _data_url_bytes(parse_data_url(url), url))
    return total
