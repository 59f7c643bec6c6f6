"""UIMessage parts as the converters build them from source items and read them back.

Part builders (text, tool calls, files), readers of what a part holds for rendering (tool names,
argument text, results as text, provider tags), and :class:`Mismatch`, raised when a part does
not hold what a recorded layout expects.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..messages._parts import (
    DEFAULT_MEDIA_TYPE,
    base64_data_url,
    compact_json,
    data_url_media_type,
    make_data_url,
    tool_name,
)
from ..messages._parts import parts as _all_parts
from ..model import Message, is_tool_type

RAW_PART_TYPE = "data-convostore-raw"
"""Part type holding a source item no UIMessage part fits; ``data`` = provider, format, value."""

KEY = "convostore"
"""The key under which layouts, provider tags and kept arguments live."""

JSON = Any
"""Any JSON value (the alias these converters use for source items and layouts)."""
Part = dict[str, Any]
"""One part of a UIMessage."""


class Mismatch(Exception):
    """A recorded layout no longer fits the message's parts: render from the parts instead."""


def text_part(text: str) -> Part:
    """A ``text`` part."""
    return {"type": "text", "text": text}


def parse_arguments(raw: str) -> tuple[JSON, str | None]:
    """``input`` for a JSON argument string, and the string itself when it must be kept."""
    try:
        parsed = json.loads(raw)
        if compact_json(parsed) == raw:
            return parsed, None
    except ValueError:
        return raw, raw
    return parsed, raw


def tool_part(name: str, call_id: str, input: JSON, raw_arguments: str | None = None) -> Part:
    """A ``tool-<name>`` part for a call (``raw_arguments``: the argument text to keep)."""
    part: Part = {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "state": "input-available",
        "input": input,
    }
    if raw_arguments is not None:
        part["callProviderMetadata"] = {KEY: {"arguments": raw_arguments}}
    return part


def is_tool(part: Any) -> bool:
    """Whether a part is a tool part (``tool-<name>`` or ``dynamic-tool``)."""
    return isinstance(part, dict) and is_tool_type(part.get("type"))


def name_of(part: Part) -> str:
    """The tool name of a tool part; :class:`Mismatch` when it names none."""
    name = tool_name(part) if is_tool(part) else None
    if name is None:
        raise Mismatch
    return name


CALL_MESSAGE_KEY = "callMessage"
"""Under ``callProviderMetadata.convostore``: the id of the earlier message holding the call of
a result part (the result carries the call's name and input, but the call is rendered from its
own message)."""


def has_call(part: Part) -> bool:
    """Whether a tool part has a call to render (a result without its call has ``input`` None;
    a result paired with a call stored in another message names that message)."""
    meta = part.get("callProviderMetadata")
    if isinstance(meta, dict) and isinstance(meta.get(KEY), dict) and isinstance(
        meta[KEY].get(CALL_MESSAGE_KEY), str
    ):
        return False
    return part.get("input") is not None or part.get("type") != "dynamic-tool"


def arguments(part: Part) -> str:
    """The JSON argument string of a tool part: the kept original, or ``input`` serialised."""
    if "input" not in part:
        raise Mismatch
    value = part["input"]
    meta = part.get("callProviderMetadata")
    if isinstance(meta, dict) and isinstance(meta.get(KEY), dict):
        raw = meta[KEY].get("arguments")
        if isinstance(raw, str):
            if isinstance(value, str) and value == raw:
                return raw
            try:
                if json.loads(raw) == value:
                    return raw
            except ValueError:
                pass
    return compact_json(value)


def output_text(part: Part) -> str | None:
    """A tool result as the text a format without structured results wants, or None."""
    state = part.get("state")
    if state == "output-error":
        text = part.get("errorText")
        return text if isinstance(text, str) else ""
    if state == "output-available":
        out = part.get("output")
        return out if isinstance(out, str) else compact_json(out)
    return None


def guess_type(name: Any, default: str) -> str:
    """The media type a file name or URL suggests, else ``default``."""
    if isinstance(name, str):
        guessed = mimetypes.guess_type(name.split("?", 1)[0])[0]
        if guessed:
            return guessed
    return default


def file_from_url(url: str, *, media_type: Any = None, filename: Any = None,
                  default: str = DEFAULT_MEDIA_TYPE) -> Part:
    """A file part for a data URL or a remote URL."""
    if url.startswith("data:"):
        mt = data_url_media_type(url)
    elif isinstance(media_type, str):
        mt = media_type
    else:
        mt = guess_type(url, default)
    part: Part = {"type": "file", "mediaType": mt}
    if isinstance(filename, str):
        part["filename"] = filename
    part["url"] = url
    return part


def file_from_base64(data: str, media_type: str, filename: Any = None) -> Part:
    """A file part whose ``url`` is the data URL of base64 ``data``."""
    part: Part = {"type": "file", "mediaType": media_type}
    if isinstance(filename, str):
        part["filename"] = filename
    part["url"] = make_data_url(media_type, data)
    return part


def split_data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 payload) of a base64 data URL, else None."""
    split = base64_data_url(url)
    if split is None:
        return None
    return split[0] or DEFAULT_MEDIA_TYPE, split[1]


def tag(part: Part) -> dict[str, Any] | None:
    """The ``convostore`` provider tag of a reasoning or raw part, if it has one."""
    if part.get("type") == RAW_PART_TYPE:
        data = part.get("data")
        return data if isinstance(data, dict) else None
    meta = part.get("providerMetadata")
    if isinstance(meta, dict) and isinstance(meta.get(KEY), dict):
        found: dict[str, Any] = meta[KEY]
        return found
    return None


def texts_of(parts: Iterable[Part]) -> list[str]:
    """The texts of the ``text`` parts."""
    return [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]


def split_steps(parts: list[Part]) -> list[list[Part]]:
    """An assistant message's parts cut at ``step-start`` parts (empty steps dropped)."""
    steps: list[list[Part]] = [[]]
    for part in parts:
        if part.get("type") == "step-start":
            if steps[-1]:
                steps.append([])
            continue
        steps[-1].append(part)
    return [s for s in steps if s]


def render_parts(
    parts: Iterable[Part],
    text: Callable[[str], JSON],
    file: Callable[[Part, str, str], JSON | None],
    other: Callable[[Part], JSON | None],
) -> list[JSON]:
    """Source blocks for parts, one part at a time; a None result is left out.

    :param text: renders a ``text`` part's text.
    :param file: renders a ``file`` part with a ``url``: ``file(part, url, media type)``.
    :param other: renders any other part (including a ``text`` or ``file`` part without a
        string ``text`` or ``url``).
    """
    blocks: list[JSON] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            block = text(part["text"])
        elif kind == "file" and isinstance(part.get("url"), str):
            block = file(part, part["url"], str(part.get("mediaType") or ""))
        else:
            block = other(part)
        if block is not None:
            blocks.append(block)
    return blocks


def message_parts(message: Message) -> list[Part]:
    """The parts of a message that are dicts (anything else is ignored when rendering)."""
    return [p for p in _all_parts(message) if isinstance(p, dict)]


def check_list(messages: Any, what: str) -> list[Any]:
    """``messages`` as a list of mappings; TypeError naming ``what`` otherwise."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise TypeError(f"{what} must be a list, not {type(messages).__name__}")
    out = list(messages)
    for i, m in enumerate(out):
        if not isinstance(m, Mapping):
            raise TypeError(f"{what}[{i}] must be a dict, not {type(m).__name__}")
    return out
