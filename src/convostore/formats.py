"""Converters between stored UIMessages and the message formats Python agent code holds.

Four formats, both directions (plain JSON in, plain JSON out; no SDK is imported):

=====================  ======================================================================
``openai-chat``        OpenAI Chat Completions ``messages``
``openai-responses``   OpenAI Responses ``input`` items (what the Agents SDK keeps in sessions)
``anthropic``          Anthropic Messages ``messages`` (and the ``system`` parameter)
``pydantic-ai``        pydantic-ai ``ModelMessage`` JSON, as
                       ``ModelMessagesTypeAdapter.dump_python(messages, mode="json")`` gives it
=====================  ======================================================================

``from_<format>(messages)`` returns UIMessages ready for ``session.append_message``;
``to_<format>(ui_messages)`` renders UIMessages back. What the UIMessages hold:

- Text as ``text`` parts (searchable); images, audio and documents as ``file`` parts whose ``url``
  is a data URL when the source carried the bytes, so the store moves them out of the row.
- A tool call and its result share one ``tool-<name>`` part (``toolCallId``, ``state``, ``input``,
  ``output``), paired by call id; the assistant turn that called it, the results and the turn that
  read them form one assistant UIMessage, steps separated by ``step-start`` parts. A result whose
  call is not in the same turn becomes a ``dynamic-tool`` part with ``input`` ``None``.
- Arguments given as a JSON string are parsed into ``input``; the original string is kept under
  ``callProviderMetadata.convostore.arguments`` whenever re-serialising would not give it back.
- Reasoning (OpenAI reasoning items with ``encrypted_content``, Anthropic ``thinking`` with its
  ``signature`` and ``redacted_thinking``, pydantic-ai thinking parts) becomes a ``reasoning``
  part whose ``providerMetadata.convostore`` holds the original item verbatim and names its
  ``provider`` and ``format``. Items no part type fits (compaction items, refusals, server tool
  calls, ...) become ``data-convostore-raw`` parts holding the item verbatim. Both are kept under
  keys the store's sanitiser leaves alone, and are dropped only when rendering for a different
  format (reasoning: a different provider).
- ``metadata.convostore`` records how the source messages were laid out (every field the parts do
  not carry, with holes where part values go). Rendering a UIMessage back to the format it came
  from fills the holes from the current parts, so ``to_x(from_x(m)) == m`` exactly; a UIMessage
  from elsewhere, or one whose parts no longer match the layout, is rendered from its parts alone.

Message ids are generated (the source formats have none that are unique per message).
"""

from __future__ import annotations

import copy
import functools
import json
import mimetypes
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import Message, is_tool_type

__all__ = [
    "FORMATS",
    "RAW_PART_TYPE",
    "from_anthropic",
    "from_openai_chat",
    "from_openai_responses",
    "from_pydantic_ai",
    "to_anthropic",
    "to_anthropic_system",
    "to_openai_chat",
    "to_openai_responses",
    "to_pydantic_ai",
]

FORMATS = ("openai-chat", "openai-responses", "anthropic", "pydantic-ai")
"""The format names used in ``metadata.convostore.format`` and in provider tags."""

RAW_PART_TYPE = "data-convostore-raw"
"""Part type holding a source item no UIMessage part fits; ``data`` = provider, format, value."""

_KEY = "convostore"
_HOLE = "$convostore"
_PROVIDER = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "pydantic-ai": None,  # pydantic-ai names the provider per part
}

JSON = Any
"""Any JSON value (the alias these converters use for source items and layouts)."""
Part = dict[str, Any]
"""One part of a UIMessage."""


class _Mismatch(Exception):
    """A recorded layout no longer fits the message's parts: render from the parts instead."""


# --- small helpers ----------------------------------------------------------------------------


def _new_id() -> str:
    return uuid.uuid4().hex


def _compact(value: JSON) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _hole(kind: str, index: int, **options: Any) -> dict[str, Any]:
    return {_HOLE: kind, "part": index, **options}


def _text_part(text: str) -> Part:
    return {"type": "text", "text": text}


def _raw_part(fmt: str, value: JSON, provider: str | None = None) -> Part:
    return {
        "type": RAW_PART_TYPE,
        "data": {"provider": provider or _PROVIDER[fmt], "format": fmt, "value": value},
    }


def _reasoning_part(fmt: str, text: str, item: JSON, provider: str | None = None) -> Part:
    return {
        "type": "reasoning",
        "text": text,
        "providerMetadata": {
            _KEY: {"provider": provider or _PROVIDER[fmt], "format": fmt, "item": item}
        },
    }


def _parse_arguments(raw: str) -> tuple[JSON, str | None]:
    """``input`` for a JSON argument string, and the string itself when it must be kept."""
    try:
        parsed = json.loads(raw)
        if _compact(parsed) == raw:
            return parsed, None
    except ValueError:
        return raw, raw
    return parsed, raw


def _tool_part(name: str, call_id: str, input: JSON, raw_arguments: str | None = None) -> Part:
    part: Part = {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "state": "input-available",
        "input": input,
    }
    if raw_arguments is not None:
        part["callProviderMetadata"] = {_KEY: {"arguments": raw_arguments}}
    return part


def _is_tool(part: Any) -> bool:
    return isinstance(part, dict) and is_tool_type(part.get("type"))


def _tool_name(part: Part) -> str:
    kind = part.get("type")
    if kind == "dynamic-tool":
        name = part.get("toolName")
        if isinstance(name, str):
            return name
        raise _Mismatch
    if isinstance(kind, str) and kind.startswith("tool-"):
        return kind[len("tool-") :]
    raise _Mismatch


def _has_call(part: Part) -> bool:
    """Whether a tool part has a call to render (a result without its call has ``input`` None)."""
    return part.get("input") is not None or part.get("type") != "dynamic-tool"


def _arguments(part: Part) -> str:
    """The JSON argument string of a tool part: the kept original, or ``input`` serialised."""
    if "input" not in part:
        raise _Mismatch
    value = part["input"]
    meta = part.get("callProviderMetadata")
    if isinstance(meta, dict) and isinstance(meta.get(_KEY), dict):
        raw = meta[_KEY].get("arguments")
        if isinstance(raw, str):
            if isinstance(value, str) and value == raw:
                return raw
            try:
                if json.loads(raw) == value:
                    return raw
            except ValueError:
                pass
    return _compact(value)


def _pair_result(part: Part, output: JSON, *, error: bool = False) -> None:
    """Put a tool result into the call's part."""
    if error:
        part["state"] = "output-error"
        part["errorText"] = output if isinstance(output, str) else _compact(output)
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


def _output_text(part: Part) -> str | None:
    """A tool result as the text a format without structured results wants, or None."""
    state = part.get("state")
    if state == "output-error":
        text = part.get("errorText")
        return text if isinstance(text, str) else ""
    if state == "output-available":
        out = part.get("output")
        return out if isinstance(out, str) else _compact(out)
    return None


def _media_type_of_data_url(url: str) -> str:
    header = url[5 : url.find(",")] if "," in url else url[5:]
    if header.endswith(";base64"):
        header = header[: -len(";base64")]
    return header or "application/octet-stream"


def _guess_type(name: Any, default: str) -> str:
    if isinstance(name, str):
        guessed = mimetypes.guess_type(name.split("?", 1)[0])[0]
        if guessed:
            return guessed
    return default


def _file_from_url(url: str, *, media_type: Any = None, filename: Any = None,
                   default: str = "application/octet-stream") -> Part:
    """A file part for a data URL or a remote URL."""
    if url.startswith("data:"):
        mt = _media_type_of_data_url(url)
    elif isinstance(media_type, str):
        mt = media_type
    else:
        mt = _guess_type(url, default)
    part: Part = {"type": "file", "mediaType": mt}
    if isinstance(filename, str):
        part["filename"] = filename
    part["url"] = url
    return part


def _file_from_base64(data: str, media_type: str, filename: Any = None) -> Part:
    part: Part = {"type": "file", "mediaType": media_type}
    if isinstance(filename, str):
        part["filename"] = filename
    part["url"] = f"data:{media_type};base64,{data}"
    return part


def _split_data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 payload) of a base64 data URL, else None."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",")
    if comma < 0 or not url[:comma].endswith(";base64"):
        return None
    return _media_type_of_data_url(url), url[comma + 1 :]


def _base64_of(part: Part) -> str:
    """The base64 payload of a file part whose ``url`` is a base64 data URL."""
    url = part.get("url")
    split = _split_data_url(url) if isinstance(url, str) else None
    if split is None:
        raise _Mismatch
    return split[1]


def _tag(part: Part) -> dict[str, Any] | None:
    """The ``convostore`` provider tag of a reasoning or raw part, if it has one."""
    if part.get("type") == RAW_PART_TYPE:
        data = part.get("data")
        return data if isinstance(data, dict) else None
    meta = part.get("providerMetadata")
    if isinstance(meta, dict) and isinstance(meta.get(_KEY), dict):
        tag: dict[str, Any] = meta[_KEY]
        return tag
    return None


def _verbatim(part: Part, fmt: str) -> JSON | None:
    """The original item of a tagged reasoning or raw part when rendering for its own format."""
    tag = _tag(part)
    if tag is None or tag.get("format") != fmt:
        return None
    key = "value" if part.get("type") == RAW_PART_TYPE else "item"
    return copy.deepcopy(tag.get(key))


def _texts(parts: Iterable[Part]) -> list[str]:
    return [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]


def _split_steps(parts: list[Part]) -> list[list[Part]]:
    steps: list[list[Part]] = [[]]
    for part in parts:
        if part.get("type") == "step-start":
            if steps[-1]:
                steps.append([])
            continue
        steps[-1].append(part)
    return [s for s in steps if s]


def _parts(message: Message) -> list[Part]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


# --- layouts: building and filling ------------------------------------------------------------


@dataclass
class _Group:
    role: str
    parts: list[Part] = field(default_factory=list)
    source: list[Any] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    last: str = ""  # "model" after a model turn, "results" after tool results

    def add(self, part: Part) -> int:
        self.parts.append(part)
        if _is_tool(part) and isinstance(part.get("toolCallId"), str):
            self.calls.setdefault(part["toolCallId"], len(self.parts) - 1)
        return len(self.parts) - 1


class _Builder:
    """Groups source messages into UIMessages (one per input message, one per assistant turn)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.groups: list[_Group] = []
        self.turn: _Group | None = None  # the assistant turn results may still join

    def standalone(self, role: str) -> _Group:
        group = _Group(role)
        self.groups.append(group)
        self.turn = None
        return group

    def model(self, *, new_message: bool) -> _Group:
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
        group = _Group("assistant")
        group.add({"type": "step-start"})
        group.last = "model"
        self.groups.append(group)
        self.turn = group
        return group

    def call_index(self, call_id: Any) -> int | None:
        if self.turn is None or not isinstance(call_id, str):
            return None
        index = self.turn.calls.get(call_id)
        if index is None or self.turn.parts[index].get("type") == "dynamic-tool":
            return None
        return index

    def results(self) -> _Group:
        """The group a message of tool results joins (the open turn, or a new assistant one)."""
        if self.turn is None:
            group = _Group("assistant")
            self.groups.append(group)
            self.turn = group
        self.turn.last = "results"
        return self.turn

    def messages(self, extra: dict[str, Any] | None = None) -> list[Message]:
        out: list[Message] = []
        for group in self.groups:
            layout: dict[str, Any] = {"format": self.fmt, "source": group.source}
            if extra:
                layout.update(extra)
            out.append({
                "id": _new_id(),
                "role": group.role,
                "parts": group.parts,
                "metadata": {_KEY: layout},
            })
        return out


def _keep_raw(fmt: str, group: _Group, item: JSON) -> JSON:
    """Keep an item no part type fits verbatim, as a raw part; return its layout (a hole)."""
    return _hole("raw", group.add(_raw_part(fmt, item)))


def _content_layout(group: _Group, content: Any, block: Callable[[Any], JSON]) -> JSON:
    """The layout of a message's ``content``: a string is one text part, a list is parsed by
    ``block`` one block at a time, anything else is kept as it is."""
    if isinstance(content, str):
        return _hole("text", group.add(_text_part(content)))
    if isinstance(content, list):
        return [block(item) for item in content]
    return content


def _result_layout(
    b: _Builder,
    group: _Group,
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
    layout = {**item, id_key: _hole("call_id", index)}
    if output_key in item:
        layout[output_key] = (
            _hole("error", index, json=not isinstance(output, str)) if error
            else _hole("output", index)
        )
    return layout


def _layout(message: Message, fmt: str) -> dict[str, Any] | None:
    meta = message.get("metadata")
    if not isinstance(meta, dict):
        return None
    layout = meta.get(_KEY)
    if isinstance(layout, dict) and layout.get("format") == fmt:
        return layout
    return None


def _resolve(hole: dict[str, Any], part: Part) -> JSON:
    kind = hole[_HOLE]
    try:
        if kind == "text":
            value = part["text"]
            if not isinstance(value, str):
                raise _Mismatch
            return value
        if kind == "url":
            value = part["url"]
            if part.get("type") != "file" or not isinstance(value, str):
                raise _Mismatch
            return value
        if kind == "b64":
            return _base64_of(part)
        if kind == "call_id":
            if not _is_tool(part) or not isinstance(part.get("toolCallId"), str):
                raise _Mismatch
            return part["toolCallId"]
        if kind == "tool_name":
            return _tool_name(part)
        if kind == "args":
            return _arguments(part)
        if kind == "input":
            if not _is_tool(part):
                raise _Mismatch
            return copy.deepcopy(part["input"])
        if kind == "output":
            if part.get("state") != "output-available":
                raise _Mismatch
            return copy.deepcopy(part.get("output"))
        if kind == "error":
            text = part.get("errorText")
            if part.get("state") != "output-error" or not isinstance(text, str):
                raise _Mismatch
            return json.loads(text) if hole.get("json") else text
        if kind in ("item", "raw"):
            tag = _tag(part)
            if tag is None:
                raise _Mismatch
            return copy.deepcopy(tag["item" if kind == "item" else "value"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _Mismatch from exc
    raise _Mismatch


def _fill(template: JSON, parts: list[Part]) -> JSON:
    """The source layout with every hole replaced by its part's current value."""
    used: set[int] = set()

    def walk(value: JSON) -> JSON:
        if isinstance(value, dict):
            if _HOLE in value:
                index = value.get("part")
                if not isinstance(index, int) or not 0 <= index < len(parts):
                    raise _Mismatch
                used.add(index)
                return _resolve(value, parts[index])
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out = walk(template)
    for i, part in enumerate(parts):
        if i not in used and part.get("type") != "step-start":
            raise _Mismatch  # a part the layout does not know: render from the parts
    return out


def _render(
    messages: Iterable[Message],
    fmt: str,
    canonical: Callable[[Message], list[JSON]],
    *,
    key: str = "source",
) -> list[JSON]:
    out: list[JSON] = []
    for message in messages:
        layout = _layout(message, fmt)
        if layout is not None and key in layout:
            try:
                filled = _fill(layout[key], _parts(message))
            except _Mismatch:
                pass
            else:
                if isinstance(filled, list):
                    out.extend(filled)
                    continue
        out.extend(canonical(message))
    return out


def _check_list(messages: Any, what: str) -> list[Any]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise TypeError(f"{what} must be a list, not {type(messages).__name__}")
    out = list(messages)
    for i, m in enumerate(out):
        if not isinstance(m, Mapping):
            raise TypeError(f"{what}[{i}] must be a dict, not {type(m).__name__}")
    return out


# --- OpenAI Chat Completions ------------------------------------------------------------------

_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_AUDIO_FORMATS = {v: k for k, v in _AUDIO_TYPES.items()}


def _chat_block(fmt: str, group: _Group, block: Any) -> JSON:
    """Parse one content block of a chat message into a part; return its layout."""
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            i = group.add(_text_part(block["text"]))
            return {**block, "text": _hole("text", i)}
        if kind == "image_url" and isinstance(block.get("image_url"), dict):
            url = block["image_url"].get("url")
            if isinstance(url, str):
                i = group.add(_file_from_url(url, default="image/*"))
                return {**block, "image_url": {**block["image_url"], "url": _hole("url", i)}}
        if kind == "input_audio" and isinstance(block.get("input_audio"), dict):
            audio = block["input_audio"]
            data, form = audio.get("data"), audio.get("format")
            if isinstance(data, str) and isinstance(form, str):
                mt = _AUDIO_TYPES.get(form, f"audio/{form}")
                i = group.add(_file_from_base64(data, mt))
                return {**block, "input_audio": {**audio, "data": _hole("b64", i)}}
        if kind == "file" and isinstance(block.get("file"), dict):
            file = block["file"]
            data, name = file.get("file_data"), file.get("filename")
            if isinstance(data, str):
                if data.startswith("data:"):
                    i = group.add(_file_from_url(data, filename=name))
                    return {**block, "file": {**file, "file_data": _hole("url", i)}}
                mt = _guess_type(name, "application/octet-stream")
                i = group.add(_file_from_base64(data, mt, name))
                return {**block, "file": {**file, "file_data": _hole("b64", i)}}
    return _keep_raw(fmt, group, block)


def from_openai_chat(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """UIMessages for OpenAI Chat Completions messages (``to_openai_chat`` gives them back).

    :param messages: dicts shaped like ``ChatCompletionMessageParam``: ``system``,
        ``developer``, ``user``, ``assistant`` (``tool_calls``), ``tool`` and others.
    """
    fmt = "openai-chat"
    b = _Builder(fmt)
    for msg in _check_list(messages, "messages"):
        msg = dict(msg)
        role = msg.get("role")
        if role == "tool":
            group = b.results()
            group.source.append(
                _result_layout(b, group, msg, id_key="tool_call_id", output_key="content")
            )
            continue
        if role == "assistant":
            group = b.model(new_message=True)
        else:
            group = b.standalone("system" if role in ("system", "developer") else str(role))
        layout = dict(msg)
        if "content" in msg:
            layout["content"] = _content_layout(
                group, msg["content"], functools.partial(_chat_block, fmt, group)
            )
        calls = msg.get("tool_calls")
        if role == "assistant" and isinstance(calls, list):
            layout["tool_calls"] = [_chat_call(fmt, group, c) for c in calls]
        group.source.append(layout)
    return b.messages()


def _chat_call(fmt: str, group: _Group, call: Any) -> JSON:
    if isinstance(call, dict) and isinstance(call.get("id"), str):
        fn = call.get("function")
        if call.get("type") == "function" and isinstance(fn, dict):
            name, raw = fn.get("name"), fn.get("arguments")
            if isinstance(name, str) and isinstance(raw, str):
                value, kept = _parse_arguments(raw)
                i = group.add(_tool_part(name, call["id"], value, kept))
                return {**call, "id": _hole("call_id", i),
                        "function": {**fn, "name": _hole("tool_name", i),
                                     "arguments": _hole("args", i)}}
        custom = call.get("custom")
        if call.get("type") == "custom" and isinstance(custom, dict):
            name, text = custom.get("name"), custom.get("input")
            if isinstance(name, str) and isinstance(text, str):
                i = group.add(_tool_part(name, call["id"], text))
                return {**call, "id": _hole("call_id", i),
                        "custom": {**custom, "name": _hole("tool_name", i),
                                   "input": _hole("input", i)}}
    return _keep_raw(fmt, group, call)


def _chat_blocks(fmt: str, parts: list[Part]) -> list[JSON]:
    blocks: list[JSON] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "file" and isinstance(part.get("url"), str):
            url, mt = part["url"], str(part.get("mediaType") or "")
            split = _split_data_url(url)
            if mt.startswith("image/"):
                blocks.append({"type": "image_url", "image_url": {"url": url}})
            elif mt in _AUDIO_FORMATS and split is not None:
                blocks.append({"type": "input_audio",
                               "input_audio": {"data": split[1], "format": _AUDIO_FORMATS[mt]}})
            elif split is not None:
                file: dict[str, Any] = {"file_data": url}
                if isinstance(part.get("filename"), str):
                    file["filename"] = part["filename"]
                blocks.append({"type": "file", "file": file})
        else:
            value = _verbatim(part, fmt)
            if value is not None and part.get("type") == RAW_PART_TYPE:
                blocks.append(value)
    return blocks


def _chat_canonical(message: Message) -> list[JSON]:
    fmt = "openai-chat"
    role = message.get("role")
    parts = _parts(message)
    if role == "assistant":
        out: list[JSON] = []
        for step in _split_steps(parts):
            tools = [p for p in step if _is_tool(p)]
            texts = _texts(step)
            msg: dict[str, Any] = {"role": "assistant",
                                   "content": "".join(texts) if texts else None}
            if tools:
                msg["tool_calls"] = [
                    {"id": p.get("toolCallId"), "type": "function",
                     "function": {"name": _tool_name(p), "arguments": _arguments(p)}}
                    for p in tools if _has_call(p)
                ]
                if not msg["tool_calls"]:
                    del msg["tool_calls"]
            if msg["content"] is not None or "tool_calls" in msg:
                out.append(msg)
            for p in tools:
                text = _output_text(p)
                if text is not None:
                    out.append({"role": "tool", "tool_call_id": p.get("toolCallId"),
                                "content": text})
        return out
    if role == "system":
        return [{"role": "system", "content": "\n\n".join(_texts(parts))}]
    blocks = _chat_blocks(fmt, parts)
    if not blocks:
        return []
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return [{"role": role, "content": blocks[0]["text"]}]
    return [{"role": role, "content": blocks}]


def to_openai_chat(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """OpenAI Chat Completions messages for UIMessages.

    A UIMessage made by :func:`from_openai_chat` comes back exactly; others are rendered from
    their parts: text and images, tool calls followed by ``tool`` messages, reasoning dropped.
    """
    return _render(messages, "openai-chat", _chat_canonical)


# --- OpenAI Responses -------------------------------------------------------------------------

_INPUT_ROLES = ("user", "system", "developer")


def _responses_block(fmt: str, group: _Group, block: Any) -> JSON:
    if isinstance(block, dict):
        kind = block.get("type")
        if kind in ("input_text", "output_text") and isinstance(block.get("text"), str):
            i = group.add(_text_part(block["text"]))
            return {**block, "text": _hole("text", i)}
        if kind == "input_image" and isinstance(block.get("image_url"), str):
            i = group.add(_file_from_url(block["image_url"], default="image/*"))
            return {**block, "image_url": _hole("url", i)}
        if kind == "input_file":
            data, url, name = block.get("file_data"), block.get("file_url"), block.get("filename")
            if isinstance(data, str):
                if data.startswith("data:"):
                    i = group.add(_file_from_url(data, filename=name))
                    return {**block, "file_data": _hole("url", i)}
                mt = _guess_type(name, "application/octet-stream")
                i = group.add(_file_from_base64(data, mt, name))
                return {**block, "file_data": _hole("b64", i)}
            if isinstance(url, str):
                i = group.add(_file_from_url(url, filename=name))
                return {**block, "file_url": _hole("url", i)}
    return _keep_raw(fmt, group, block)


def _responses_message(fmt: str, group: _Group, item: dict[str, Any]) -> JSON:
    if "content" not in item:
        return item
    block = functools.partial(_responses_block, fmt, group)
    return {**item, "content": _content_layout(group, item["content"], block)}


def from_openai_responses(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """UIMessages for OpenAI Responses input items (``to_openai_responses`` gives them back).

    :param items: dicts shaped like ``ResponseInputItemParam``: messages (``input_text``,
        ``input_image``, ``input_file``, ``output_text``), ``reasoning``, ``function_call``,
        ``function_call_output``, ``custom_tool_call``, ``compaction`` and any other type
        (kept verbatim).
    """
    fmt = "openai-responses"
    b = _Builder(fmt)
    for item in _check_list(items, "items"):
        item = dict(item)
        kind = item.get("type", "message" if "role" in item else None)
        role = item.get("role")
        if kind == "message" and role in _INPUT_ROLES:
            group = b.standalone("system" if role != "user" else "user")
            group.source.append(_responses_message(fmt, group, item))
        elif kind == "message" and role == "assistant":
            group = b.model(new_message=False)
            group.source.append(_responses_message(fmt, group, item))
        elif kind == "reasoning":
            group = b.model(new_message=False)
            i = group.add(_reasoning_part(fmt, _reasoning_text(item), item))
            group.source.append(_hole("item", i))
        elif kind in ("function_call", "custom_tool_call"):
            group = b.model(new_message=False)
            group.source.append(_responses_call(fmt, group, item))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            group = b.results()
            group.source.append(_result_layout(b, group, item, id_key="call_id",
                                               output_key="output", name=item.get("name")))
        elif kind == "compaction":
            group = b.standalone("assistant")
            group.source.append(_keep_raw(fmt, group, item))
        else:
            group = b.model(new_message=False)
            group.source.append(_keep_raw(fmt, group, item))
    return b.messages()


def _reasoning_text(item: dict[str, Any]) -> str:
    texts: list[str] = []
    for key in ("summary", "content"):
        blocks = item.get(key)
        if isinstance(blocks, list):
            texts.extend(
                blk["text"] for blk in blocks
                if isinstance(blk, dict) and isinstance(blk.get("text"), str)
            )
        if texts:
            break
    return "\n\n".join(texts)


def _responses_call(fmt: str, group: _Group, item: dict[str, Any]) -> JSON:
    call_id, name = item.get("call_id"), item.get("name")
    if isinstance(call_id, str) and isinstance(name, str):
        if item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
            value, kept = _parse_arguments(item["arguments"])
            i = group.add(_tool_part(name, call_id, value, kept))
            return {**item, "call_id": _hole("call_id", i), "name": _hole("tool_name", i),
                    "arguments": _hole("args", i)}
        if item.get("type") == "custom_tool_call" and isinstance(item.get("input"), str):
            i = group.add(_tool_part(name, call_id, item["input"]))
            return {**item, "call_id": _hole("call_id", i), "name": _hole("tool_name", i),
                    "input": _hole("input", i)}
    return _keep_raw(fmt, group, item)


def _responses_canonical(message: Message) -> list[JSON]:
    fmt = "openai-responses"
    role = message.get("role")
    parts = _parts(message)
    if role != "assistant":
        blocks: list[JSON] = []
        for part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                blocks.append({"type": "input_text", "text": part["text"]})
            elif kind == "file" and isinstance(part.get("url"), str):
                url, mt = part["url"], str(part.get("mediaType") or "")
                if mt.startswith("image/"):
                    blocks.append({"type": "input_image", "image_url": url, "detail": "auto"})
                else:
                    block: dict[str, Any] = {"type": "input_file"}
                    if isinstance(part.get("filename"), str):
                        block["filename"] = part["filename"]
                    block["file_data" if url.startswith("data:") else "file_url"] = url
                    blocks.append(block)
            elif kind == RAW_PART_TYPE:
                value = _verbatim(part, fmt)
                if value is not None:
                    blocks.append(value)
        if not blocks:
            return []
        out_role = role if role in _INPUT_ROLES else "user"
        if len(blocks) == 1 and blocks[0].get("type") == "input_text":
            return [{"role": out_role, "content": blocks[0]["text"]}]
        return [{"role": out_role, "content": blocks}]
    out: list[JSON] = []
    pending: list[Part] = []  # tool parts whose outputs follow the run of calls

    def flush() -> None:
        for p in pending:
            text = _output_text(p)
            if text is not None:
                out.append({"type": "function_call_output", "call_id": p.get("toolCallId"),
                            "output": text})
        pending.clear()

    text: list[str] = []

    def flush_text() -> None:
        if text:
            out.append({"role": "assistant", "content": "".join(text)})
            text.clear()

    for part in parts:
        kind = part.get("type")
        if _is_tool(part):
            flush_text()
            if _has_call(part):
                out.append({"type": "function_call", "call_id": part.get("toolCallId"),
                            "name": _tool_name(part), "arguments": _arguments(part)})
            pending.append(part)
            continue
        flush()
        if kind == "text" and isinstance(part.get("text"), str):
            text.append(part["text"])
        elif kind in ("reasoning", RAW_PART_TYPE):
            value = _verbatim(part, fmt)
            if value is not None:
                flush_text()
                out.append(value)
    flush()
    flush_text()
    return out


def to_openai_responses(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """OpenAI Responses input items for UIMessages.

    A UIMessage made by :func:`from_openai_responses` comes back exactly (reasoning items with
    their ``encrypted_content``, compaction items, ids and statuses included). Others are
    rendered from their parts; reasoning and raw items from other formats are dropped.
    """
    return _render(messages, "openai-responses", _responses_canonical)


# --- Anthropic Messages -----------------------------------------------------------------------


def _anthropic_block(fmt: str, group: _Group, block: Any, b: _Builder | None = None) -> JSON:
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            i = group.add(_text_part(block["text"]))
            return {**block, "text": _hole("text", i)}
        if kind in ("image", "document") and isinstance(block.get("source"), dict):
            source = block["source"]
            stype = source.get("type")
            if stype == "base64" and isinstance(source.get("data"), str) and isinstance(
                source.get("media_type"), str
            ):
                i = group.add(_file_from_base64(source["data"], source["media_type"],
                                                block.get("title")))
                return {**block, "source": {**source, "data": _hole("b64", i)}}
            if stype == "url" and isinstance(source.get("url"), str):
                default = "image/*" if kind == "image" else "application/pdf"
                i = group.add(_file_from_url(source["url"], default=default))
                return {**block, "source": {**source, "url": _hole("url", i)}}
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            i = group.add(_reasoning_part(fmt, block["thinking"], block))
            return _hole("item", i)
        if kind == "redacted_thinking":
            i = group.add(_reasoning_part(fmt, "", block))
            return _hole("item", i)
        if kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(
            block.get("name"), str
        ) and "input" in block:
            i = group.add(_tool_part(block["name"], block["id"], block["input"]))
            return {**block, "id": _hole("call_id", i), "name": _hole("tool_name", i),
                    "input": _hole("input", i)}
        if kind == "tool_result" and b is not None:
            return _result_layout(b, group, block, id_key="tool_use_id", output_key="content",
                                  error=block.get("is_error") is True)
    return _keep_raw(fmt, group, block)


def _anthropic_content(fmt: str, group: _Group, content: Any, b: _Builder | None = None) -> JSON:
    """The layout of a message's (or the ``system`` parameter's) content; ``b`` pairs results."""
    block = functools.partial(_anthropic_block, fmt, group, b=b)
    return _content_layout(group, content, block)


def from_anthropic(
    messages: Iterable[Mapping[str, Any]], *, system: str | list[Any] | None = None
) -> list[Message]:
    """UIMessages for Anthropic Messages (``to_anthropic`` / ``to_anthropic_system`` invert it).

    :param messages: ``{"role": "user" | "assistant", "content": str | [blocks]}`` dicts with
        ``text``, ``image``, ``document``, ``tool_use``, ``tool_result``, ``thinking`` (with its
        ``signature``), ``redacted_thinking`` and any other block (kept verbatim).
    :param system: the request's ``system`` parameter, if any: it becomes the first UIMessage
        (role ``system``).
    """
    fmt = "anthropic"
    b = _Builder(fmt)
    if system is not None:
        group = b.standalone("system")
        group.source.append(_anthropic_content(fmt, group, system))
    for msg in _check_list(messages, "messages"):
        msg = dict(msg)
        role, content = msg.get("role"), msg.get("content")
        if role == "assistant":
            group = b.model(new_message=True)
        elif role == "user" and isinstance(content, list) and any(
            isinstance(blk, dict) and blk.get("type") == "tool_result" for blk in content
        ) and all(
            b.call_index(blk.get("tool_use_id")) is not None
            for blk in content if isinstance(blk, dict) and blk.get("type") == "tool_result"
        ):
            group = b.results()
        else:
            group = b.standalone(str(role))
        layout = dict(msg)
        if "content" in msg:
            layout["content"] = _anthropic_content(fmt, group, content, b)
        group.source.append(layout)
    messages_out = b.messages()
    if system is not None:
        meta = messages_out[0]["metadata"][_KEY]
        meta["system"] = meta.pop("source")[0]
    return messages_out


def _anthropic_blocks(parts: list[Part], *, assistant: bool) -> list[JSON]:
    fmt = "anthropic"
    blocks: list[JSON] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "file" and isinstance(part.get("url"), str) and not assistant:
            url, mt = part["url"], str(part.get("mediaType") or "")
            block_type = "image" if mt.startswith("image/") else "document"
            if block_type == "document" and mt != "application/pdf":
                continue
            split = _split_data_url(url)
            source: dict[str, Any] = (
                {"type": "base64", "media_type": split[0], "data": split[1]} if split
                else {"type": "url", "url": url}
            )
            blocks.append({"type": block_type, "source": source})
        elif _is_tool(part) and assistant:
            if _has_call(part):
                blocks.append({"type": "tool_use", "id": part.get("toolCallId"),
                               "name": _tool_name(part), "input": part.get("input")})
        elif kind in ("reasoning", RAW_PART_TYPE):
            value = _verbatim(part, fmt)
            if value is not None:
                blocks.append(value)
    return blocks


def _tool_result_block(part: Part) -> JSON | None:
    state = part.get("state")
    if state == "output-available":
        return {"type": "tool_result", "tool_use_id": part.get("toolCallId"),
                "content": part.get("output") if isinstance(part.get("output"), (str, list))
                else _compact(part.get("output"))}
    if state == "output-error":
        return {"type": "tool_result", "tool_use_id": part.get("toolCallId"),
                "content": part.get("errorText", ""), "is_error": True}
    return None


def _anthropic_canonical(message: Message) -> list[JSON]:
    role = message.get("role")
    parts = _parts(message)
    if role == "system":
        return []
    if role != "assistant":
        blocks = _anthropic_blocks(parts, assistant=False)
        results = [r for r in (_tool_result_block(p) for p in parts if _is_tool(p)) if r]
        blocks = results + blocks
        if not blocks:
            return []
        if len(blocks) == 1 and blocks[0].get("type") == "text":
            return [{"role": "user", "content": blocks[0]["text"]}]
        return [{"role": "user", "content": blocks}]
    out: list[JSON] = []
    for step in _split_steps(parts):
        blocks = _anthropic_blocks(step, assistant=True)
        if blocks:
            out.append({"role": "assistant", "content": blocks})
        results = [r for r in (_tool_result_block(p) for p in step if _is_tool(p)) if r]
        if results:
            out.append({"role": "user", "content": results})
    return out


def to_anthropic(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Anthropic ``messages`` for UIMessages (system UIMessages go to :func:`to_anthropic_system`).

    A UIMessage made by :func:`from_anthropic` comes back exactly (thinking blocks with their
    signatures included). Others are rendered from their parts: tool results in a ``user``
    message after the call; reasoning not signed by Anthropic is dropped.
    """
    kept = [m for m in messages if not _is_system(m)]
    return _render(kept, "anthropic", _anthropic_canonical)


def _is_system(message: Message) -> bool:
    layout = _layout(message, "anthropic")
    if layout is not None and "system" in layout:
        return True
    return message.get("role") == "system"


def to_anthropic_system(messages: Iterable[Message]) -> str | list[Any] | None:
    """The Anthropic ``system`` parameter for UIMessages: their system messages, or None.

    The one made by :func:`from_anthropic` comes back exactly; several are joined.
    """
    values: list[Any] = []
    for message in messages:
        if not _is_system(message):
            continue
        layout = _layout(message, "anthropic")
        if layout is not None and "system" in layout:
            try:
                values.append(_fill(layout["system"], _parts(message)))
                continue
            except _Mismatch:
                pass
        values.append("\n\n".join(_texts(_parts(message))))
    if not values:
        return None
    if len(values) == 1:
        value: str | list[Any] = values[0]
        return value
    if all(isinstance(v, str) for v in values):
        return "\n\n".join(values)
    blocks: list[Any] = []
    for v in values:
        blocks.extend(v if isinstance(v, list) else [{"type": "text", "text": v}])
    return blocks


# --- pydantic-ai ------------------------------------------------------------------------------

_URL_KINDS = {"image-url": "image/*", "document-url": "application/octet-stream",
              "audio-url": "audio/*", "video-url": "video/*"}


def _pydantic_user_item(fmt: str, group: _Group, item: Any) -> JSON:
    if isinstance(item, str):
        return _hole("text", group.add(_text_part(item)))
    if isinstance(item, dict):
        kind = item.get("kind")
        if kind == "binary" and isinstance(item.get("data"), str) and isinstance(
            item.get("media_type"), str
        ):
            i = group.add(_file_from_base64(item["data"], item["media_type"]))
            return {**item, "data": _hole("b64", i)}
        if kind in _URL_KINDS and isinstance(item.get("url"), str):
            i = group.add(_file_from_url(item["url"], media_type=item.get("media_type"),
                                         default=_URL_KINDS[kind]))
            return {**item, "url": _hole("url", i)}
    return _keep_raw(fmt, group, item)


def from_pydantic_ai(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """UIMessages for pydantic-ai messages in JSON form (``to_pydantic_ai`` gives them back).

    :param messages: ``ModelMessagesTypeAdapter.dump_python(messages, mode="json")``: requests
        (``system-prompt``, ``user-prompt``, ``tool-return``, ``retry-prompt`` parts) and
        responses (``text``, ``thinking``, ``tool-call`` parts); any other part is kept verbatim.
    """
    fmt = "pydantic-ai"
    b = _Builder(fmt)
    for msg in _check_list(messages, "messages"):
        msg = dict(msg)
        parts = msg.get("parts")
        parts = parts if isinstance(parts, list) else []
        if msg.get("kind") == "response":
            group = b.model(new_message=True)
            layout_parts = [_pydantic_response_part(fmt, group, p) for p in parts]
        else:
            kinds = [p.get("part_kind") for p in parts if isinstance(p, dict)]
            results = [p for p in parts if isinstance(p, dict)
                       and p.get("part_kind") in ("tool-return", "retry-prompt")]
            if results and all(b.call_index(p.get("tool_call_id")) is not None
                               for p in results):
                group = b.results()
            elif kinds and all(k == "system-prompt" for k in kinds):
                group = b.standalone("system")
            else:
                group = b.standalone("user")
            system_as_text = group.role == "system"
            layout_parts = [_pydantic_request_part(fmt, group, p, b, system_as_text)
                            for p in parts]
        group.source.append({**msg, "parts": layout_parts} if "parts" in msg else msg)
    return b.messages()


def _pydantic_request_part(
    fmt: str, group: _Group, part: Any, b: _Builder, system_as_text: bool
) -> JSON:
    if isinstance(part, dict):
        kind = part.get("part_kind")
        content = part.get("content")
        if kind == "user-prompt":
            if isinstance(content, list):
                return {**part, "content": [_pydantic_user_item(fmt, group, c) for c in content]}
            if isinstance(content, str):
                return {**part, "content": _hole("text", group.add(_text_part(content)))}
        if kind == "system-prompt" and system_as_text and isinstance(content, str):
            return {**part, "content": _hole("text", group.add(_text_part(content)))}
        if kind in ("tool-return", "retry-prompt") and (
            kind == "tool-return" or isinstance(part.get("tool_name"), str)
        ):
            return _result_layout(b, group, part, id_key="tool_call_id", output_key="content",
                                  name=part.get("tool_name"), error=kind == "retry-prompt")
    return _keep_raw(fmt, group, part)


def _pydantic_response_part(fmt: str, group: _Group, part: Any) -> JSON:
    if isinstance(part, dict):
        kind = part.get("part_kind")
        content = part.get("content")
        if kind == "text" and isinstance(content, str):
            return {**part, "content": _hole("text", group.add(_text_part(content)))}
        if kind == "thinking" and isinstance(content, str):
            provider = part.get("provider_name")
            i = group.add(_reasoning_part(fmt, content, part,
                                          provider if isinstance(provider, str) else "pydantic-ai"))
            return _hole("item", i)
        if kind == "tool-call" and isinstance(part.get("tool_name"), str) and isinstance(
            part.get("tool_call_id"), str
        ):
            args = part.get("args")
            layout = {**part, "tool_name": None, "tool_call_id": None}
            if isinstance(args, str):
                value, kept = _parse_arguments(args)
                i = group.add(_tool_part(part["tool_name"], part["tool_call_id"], value, kept))
                layout["args"] = _hole("args", i)
            else:
                i = group.add(_tool_part(part["tool_name"], part["tool_call_id"], args))
                layout["args"] = _hole("input", i)
            layout["tool_name"] = _hole("tool_name", i)
            layout["tool_call_id"] = _hole("call_id", i)
            return layout
    return _keep_raw(fmt, group, part)


def _pydantic_canonical(message: Message) -> list[JSON]:
    fmt = "pydantic-ai"
    role = message.get("role")
    parts = _parts(message)
    if role == "system":
        texts = _texts(parts)
        return [{"kind": "request", "parts": [
            {"part_kind": "system-prompt", "content": "\n\n".join(texts)}]}] if texts else []
    if role != "assistant":
        content: list[Any] = []
        raw: list[Any] = []
        for part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                content.append(part["text"])
            elif kind == "file" and isinstance(part.get("url"), str):
                url, mt = part["url"], str(part.get("mediaType") or "")
                split = _split_data_url(url)
                if split is not None:
                    content.append({"kind": "binary", "data": split[1], "media_type": split[0]})
                else:
                    url_kind = next((k for k, v in _URL_KINDS.items()
                                     if mt.split("/")[0] == v.split("/")[0]), "document-url")
                    content.append({"kind": url_kind, "url": url})
            elif kind == RAW_PART_TYPE:
                value = _verbatim(part, fmt)
                if value is not None:
                    raw.append(value)
        request_parts: list[Any] = list(raw)
        if content:
            single = len(content) == 1 and isinstance(content[0], str)
            request_parts.append({"part_kind": "user-prompt",
                                  "content": content[0] if single else content})
        return [{"kind": "request", "parts": request_parts}] if request_parts else []
    out: list[JSON] = []
    for step in _split_steps(parts):
        response: list[Any] = []
        results: list[Any] = []
        for part in step:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                response.append({"part_kind": "text", "content": part["text"]})
            elif kind == "reasoning":
                value = _verbatim(part, fmt)
                if value is None and _tag(part) is None and isinstance(part.get("text"), str):
                    value = {"part_kind": "thinking", "content": part["text"]}
                if value is not None:
                    response.append(value)
            elif kind == RAW_PART_TYPE:
                value = _verbatim(part, fmt)
                if value is not None:
                    response.append(value)
            elif _is_tool(part):
                name, call_id = _tool_name(part), part.get("toolCallId")
                if _has_call(part):
                    meta = part.get("callProviderMetadata")
                    kept = isinstance(meta, dict) and isinstance(meta.get(_KEY), dict)
                    response.append({"part_kind": "tool-call", "tool_name": name,
                                     "args": _arguments(part) if kept else part.get("input"),
                                     "tool_call_id": call_id})
                if part.get("state") == "output-available":
                    results.append({"part_kind": "tool-return", "tool_name": name,
                                    "content": part.get("output"), "tool_call_id": call_id})
                elif part.get("state") == "output-error":
                    results.append({"part_kind": "retry-prompt", "tool_name": name,
                                    "content": part.get("errorText", ""),
                                    "tool_call_id": call_id})
        if response:
            out.append({"kind": "response", "parts": response})
        if results:
            out.append({"kind": "request", "parts": results})
    return out


def to_pydantic_ai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """pydantic-ai messages in JSON form for UIMessages.

    Load the result with ``ModelMessagesTypeAdapter.validate_python(...)``. A UIMessage made by
    :func:`from_pydantic_ai` comes back exactly; others are rendered from their parts (requests
    with user prompts, responses with text, thinking and tool calls, then tool returns).
    """
    return _render(messages, "pydantic-ai", _pydantic_canonical)
