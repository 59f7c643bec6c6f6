"""What the four converters share: part builders, the layout builder, holes and rendering.

A converter parses source messages into UIMessage parts with a :class:`Builder`, recording in
``metadata.convostore`` the source's layout with *holes* (``{"$convostore": kind, "part": i}``)
where a part's value goes. Rendering back fills each hole from the current part through
:data:`RESOLVERS` (one function per hole kind); when the layout no longer fits the parts
(:class:`Mismatch`), the message is rendered from its parts alone by the format's *canonical*
renderer. :class:`Format` binds one format's name and provider to the helpers that need them.
"""

from __future__ import annotations

import copy
import json
import mimetypes
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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

_HOLE = "$convostore"

JSON = Any
"""Any JSON value (the alias these converters use for source items and layouts)."""
Part = dict[str, Any]
"""One part of a UIMessage."""


class Mismatch(Exception):
    """A recorded layout no longer fits the message's parts: render from the parts instead."""


# --- parts ------------------------------------------------------------------------------------


def hole(kind: str, index: int, **options: Any) -> dict[str, Any]:
    """The layout placeholder for a value that part ``index`` holds (see :data:`RESOLVERS`)."""
    return {_HOLE: kind, "part": index, **options}


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


def _pair_result(part: Part, output: JSON, *, error: bool = False) -> None:
    """Put a tool result into the call's part."""
    if error:
        part["state"] = "output-error"
        part["errorText"] = output if isinstance(output, str) else compact_json(output)
    else:
        part["state"] = "output-available"
        part["output"] = output


def _orphan_result(name: Any, call_id: Any, output: JSON, *, error: bool = False) -> Part:
    part: Part = {
        "type": "dynamic-tool",
        "toolName": name if isinstance(name, str) else "unknown",
        "toolCallId": call_id if isinstance(call_id, str) else "",
        "state": "input-available",
        "input": None,
    }
    _pair_result(part, output, error=error)
    return part


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


def file_data_hole(group: Group, data: str, filename: Any) -> dict[str, Any]:
    """A file part for a ``file_data`` value (a data URL, or bare base64 whose type the file
    name suggests); return the value's layout (a hole)."""
    if data.startswith("data:"):
        return hole("url", group.add(file_from_url(data, filename=filename)))
    mt = guess_type(filename, DEFAULT_MEDIA_TYPE)
    return hole("b64", group.add(file_from_base64(data, mt, filename)))


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


# --- building layouts -------------------------------------------------------------------------


@dataclass
class Group:
    """The parts and source layout of one UIMessage being built."""

    role: str
    parts: list[Part] = field(default_factory=list)
    source: list[Any] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    last: str = ""  # "model" after a model turn, "results" after tool results

    def add(self, part: Part) -> int:
        """Append a part; return its index."""
        self.parts.append(part)
        if is_tool(part) and isinstance(part.get("toolCallId"), str):
            self.calls.setdefault(part["toolCallId"], len(self.parts) - 1)
        return len(self.parts) - 1


class Builder:
    """Groups source messages into UIMessages (one per input message, one per assistant turn)."""

    def __init__(self, format_name: str) -> None:
        self.format_name = format_name
        self.groups: list[Group] = []
        self.turn: Group | None = None  # the assistant turn results may still join

    def standalone(self, role: str) -> Group:
        """A new UIMessage of ``role`` that closes the open turn."""
        group = Group(role)
        self.groups.append(group)
        self.turn = None
        return group

    def model(self, *, new_message: bool) -> Group:
        """The group a model-side message joins: the open turn after results, else a new one.

        ``new_message``: the item opens a new model message (chat, Anthropic and pydantic-ai
        messages always do; Responses items continue the turn they follow).
        """
        turn = self.turn
        if turn is not None and (turn.last == "results" or not new_message):
            if turn.last == "results":
                turn.add({"type": "step-start"})
            turn.last = "model"
            return turn
        group = Group("assistant")
        group.add({"type": "step-start"})
        group.last = "model"
        self.groups.append(group)
        self.turn = group
        return group

    def call_index(self, call_id: Any) -> int | None:
        """Index of the open turn's part for a call, or None (results then stand alone)."""
        if self.turn is None or not isinstance(call_id, str):
            return None
        index = self.turn.calls.get(call_id)
        if index is None or self.turn.parts[index].get("type") == "dynamic-tool":
            return None
        return index

    def results(self) -> Group:
        """The group a message of tool results joins (the open turn, or a new assistant one)."""
        if self.turn is None:
            group = Group("assistant")
            self.groups.append(group)
            self.turn = group
        self.turn.last = "results"
        return self.turn

    def messages(self, extra: dict[str, Any] | None = None) -> list[Message]:
        """The UIMessages built, each with its layout under ``metadata.convostore``."""
        out: list[Message] = []
        for group in self.groups:
            layout: dict[str, Any] = {"format": self.format_name, "source": group.source}
            if extra:
                layout.update(extra)
            out.append({
                "id": uuid.uuid4().hex,
                "role": group.role,
                "parts": group.parts,
                "metadata": {KEY: layout},
            })
        return out


def content_layout(group: Group, content: Any, block: Callable[[Any], JSON]) -> JSON:
    """The layout of a message's ``content``: a string is one text part, a list is parsed by
    ``block`` one block at a time, anything else is kept as it is."""
    if isinstance(content, str):
        return hole("text", group.add(text_part(content)))
    if isinstance(content, list):
        return [block(item) for item in content]
    return content


def result_layout(
    b: Builder,
    group: Group,
    item: dict[str, Any],
    *,
    id_key: str,
    output_key: str,
    name: Any = None,
    error: bool = False,
) -> dict[str, Any]:
    """Put a tool result into its call's part in the open turn, or into a ``dynamic-tool`` part
    of ``group`` when the call is not there; return the item's layout.

    :param item: the source result: its call id is ``item[id_key]``, its output
        ``item[output_key]`` (an error text when ``error``).
    :param name: the tool name the source gives, for a result without its call.
    """
    call_id, output = item.get(id_key), item.get(output_key)
    index = b.call_index(call_id)
    if index is not None:
        _pair_result(group.parts[index], output, error=error)
    else:
        index = group.add(_orphan_result(name, call_id, output, error=error))
    layout = {**item, id_key: hole("call_id", index)}
    if output_key in item:
        layout[output_key] = (
            hole("error", index, json=not isinstance(output, str)) if error
            else hole("output", index)
        )
    return layout


# --- filling holes ----------------------------------------------------------------------------


def _text(spec: dict[str, Any], part: Part) -> JSON:
    value = part["text"]
    if not isinstance(value, str):
        raise Mismatch
    return value


def _url(spec: dict[str, Any], part: Part) -> JSON:
    value = part["url"]
    if part.get("type") != "file" or not isinstance(value, str):
        raise Mismatch
    return value


def _b64(spec: dict[str, Any], part: Part) -> JSON:
    url = part.get("url")
    split = split_data_url(url) if isinstance(url, str) else None
    if split is None:
        raise Mismatch
    return split[1]


def _call_id(spec: dict[str, Any], part: Part) -> JSON:
    if not is_tool(part) or not isinstance(part.get("toolCallId"), str):
        raise Mismatch
    return part["toolCallId"]


def _input(spec: dict[str, Any], part: Part) -> JSON:
    if not is_tool(part):
        raise Mismatch
    return copy.deepcopy(part["input"])


def _output(spec: dict[str, Any], part: Part) -> JSON:
    if part.get("state") != "output-available":
        raise Mismatch
    return copy.deepcopy(part.get("output"))


def _error(spec: dict[str, Any], part: Part) -> JSON:
    text = part.get("errorText")
    if part.get("state") != "output-error" or not isinstance(text, str):
        raise Mismatch
    return json.loads(text) if spec.get("json") else text


def _tagged(key: str) -> Callable[[dict[str, Any], Part], JSON]:
    def resolve(spec: dict[str, Any], part: Part) -> JSON:
        found = tag(part)
        if found is None:
            raise Mismatch
        return copy.deepcopy(found[key])

    return resolve


RESOLVERS: dict[str, Callable[[dict[str, Any], Part], JSON]] = {
    "text": _text,
    "url": _url,
    "b64": _b64,
    "call_id": _call_id,
    "tool_name": lambda spec, part: name_of(part),
    "args": lambda spec, part: arguments(part),
    "input": _input,
    "output": _output,
    "error": _error,
    "item": _tagged("item"),  # a reasoning part's original item
    "raw": _tagged("value"),  # a raw part's original value
}
"""Hole kind -> the function giving a hole's value from its part (raising :class:`Mismatch`)."""


def _resolve(spec: dict[str, Any], part: Part) -> JSON:
    kind = spec[_HOLE]
    resolver = RESOLVERS.get(kind) if isinstance(kind, str) else None
    if resolver is None:
        raise Mismatch
    try:
        return resolver(spec, part)
    except (KeyError, TypeError, ValueError) as exc:
        raise Mismatch from exc


def fill(template: JSON, parts: list[Part]) -> JSON:
    """The source layout with every hole replaced by its part's current value."""
    used: set[int] = set()

    def walk(value: JSON) -> JSON:
        if isinstance(value, dict):
            if _HOLE in value:
                index = value.get("part")
                if not isinstance(index, int) or not 0 <= index < len(parts):
                    raise Mismatch
                used.add(index)
                return _resolve(value, parts[index])
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out = walk(template)
    for i, part in enumerate(parts):
        if i not in used and part.get("type") != "step-start":
            raise Mismatch  # a part the layout does not know: render from the parts
    return out


# --- one format -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    """One format's name and provider, bound to the helpers that record or check them."""

    name: str
    """The name in ``metadata.convostore.format`` and in provider tags."""
    provider: str | None
    """The provider named in tags; None when the source names it per item (pydantic-ai)."""

    def builder(self) -> Builder:
        """A :class:`Builder` recording this format in its layouts."""
        return Builder(self.name)

    def raw_part(self, value: JSON, provider: str | None = None) -> Part:
        """A part holding a source item verbatim."""
        return {
            "type": RAW_PART_TYPE,
            "data": {"provider": provider or self.provider, "format": self.name, "value": value},
        }

    def reasoning_part(self, text: str, item: JSON, provider: str | None = None) -> Part:
        """A ``reasoning`` part whose provider tag keeps the original item."""
        return {
            "type": "reasoning",
            "text": text,
            "providerMetadata": {
                KEY: {"provider": provider or self.provider, "format": self.name, "item": item}
            },
        }

    def keep_raw(self, group: Group, item: JSON) -> JSON:
        """Keep an item no part type fits verbatim, as a raw part; return its layout (a hole)."""
        return hole("raw", group.add(self.raw_part(item)))

    def verbatim(self, part: Part) -> JSON | None:
        """The original item of a tagged reasoning or raw part made from this format, else None."""
        found = tag(part)
        if found is None or found.get("format") != self.name:
            return None
        key = "value" if part.get("type") == RAW_PART_TYPE else "item"
        return copy.deepcopy(found.get(key))

    def raw_value(self, part: Part) -> JSON | None:
        """The original value of a raw part made from this format, else None."""
        return self.verbatim(part) if part.get("type") == RAW_PART_TYPE else None

    def layout(self, message: Message) -> dict[str, Any] | None:
        """The layout a message made from this format recorded, else None."""
        meta = message.get("metadata")
        if not isinstance(meta, dict):
            return None
        layout = meta.get(KEY)
        if isinstance(layout, dict) and layout.get("format") == self.name:
            return layout
        return None

    def render(
        self, messages: Iterable[Message], canonical: Callable[[Message], list[JSON]]
    ) -> list[JSON]:
        """Source messages for UIMessages: the recorded layout filled in where it still fits,
        else what ``canonical`` renders from the parts."""
        out: list[JSON] = []
        for message in messages:
            layout = self.layout(message)
            if layout is not None and "source" in layout:
                try:
                    filled = fill(layout["source"], message_parts(message))
                except Mismatch:
                    pass
                else:
                    if isinstance(filled, list):
                        out.extend(filled)
                        continue
            out.extend(canonical(message))
        return out
