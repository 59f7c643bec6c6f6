"""OpenAI Chat Completions ``messages``, to and from UIMessages."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from ..model import Message
from . import _parts
from ._format import Format
from ._layout import Group, content_layout, file_data_hole, hole, result_layout
from ._parts import JSON, Part

FORMAT = Format("openai-chat", provider="openai")
"""This module's format: its name and provider, bound to the shared helpers."""

_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_AUDIO_FORMATS = {v: k for k, v in _AUDIO_TYPES.items()}


def _chat_block(group: Group, block: Any) -> JSON:
    """Parse one content block of a chat message into a part; return its layout."""
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            i = group.add(_parts.text_part(block["text"]))
            return {**block, "text": hole("text", i)}
        if kind == "image_url" and isinstance(block.get("image_url"), dict):
            url = block["image_url"].get("url")
            if isinstance(url, str):
                i = group.add(_parts.file_from_url(url, default="image/*"))
                return {**block, "image_url": {**block["image_url"], "url": hole("url", i)}}
        if kind == "input_audio" and isinstance(block.get("input_audio"), dict):
            audio = block["input_audio"]
            data, form = audio.get("data"), audio.get("format")
            if isinstance(data, str) and isinstance(form, str):
                mt = _AUDIO_TYPES.get(form, f"audio/{form}")
                i = group.add(_parts.file_from_base64(data, mt))
                return {**block, "input_audio": {**audio, "data": hole("b64", i)}}
        if kind == "file" and isinstance(block.get("file"), dict):
            file = block["file"]
            data, name = file.get("file_data"), file.get("filename")
            if isinstance(data, str):
                layout = file_data_hole(group, data, name)
                return {**block, "file": {**file, "file_data": layout}}
    return FORMAT.keep_raw(group, block)


def from_openai_chat(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """UIMessages for OpenAI Chat Completions messages (``to_openai_chat`` gives them back).

    :param messages: dicts shaped like ``ChatCompletionMessageParam``: ``system``,
        ``developer``, ``user``, ``assistant`` (``tool_calls``), ``tool`` and others.
    """
    b = FORMAT.builder()
    for msg in _parts.check_list(messages, "messages"):
        msg = dict(msg)
        role = msg.get("role")
        if role == "tool":
            group = b.results()
            group.source.append(
                result_layout(b, group, msg, id_key="tool_call_id", output_key="content")
            )
            continue
        if role == "assistant":
            group = b.model(new_message=True)
        else:
            group = b.standalone("system" if role in ("system", "developer") else str(role))
        layout = dict(msg)
        if "content" in msg:
            layout["content"] = content_layout(
                group, msg["content"], functools.partial(_chat_block, group)
            )
        calls = msg.get("tool_calls")
        if role == "assistant" and isinstance(calls, list):
            layout["tool_calls"] = [_chat_call(group, c) for c in calls]
        group.source.append(layout)
    return b.messages()


def _chat_call(group: Group, call: Any) -> JSON:
    if isinstance(call, dict) and isinstance(call.get("id"), str):
        fn = call.get("function")
        if call.get("type") == "function" and isinstance(fn, dict):
            name, raw = fn.get("name"), fn.get("arguments")
            if isinstance(name, str) and isinstance(raw, str):
                value, kept = _parts.parse_arguments(raw)
                i = group.add(_parts.tool_part(name, call["id"], value, kept))
                return {**call, "id": hole("call_id", i),
                        "function": {**fn, "name": hole("tool_name", i),
                                     "arguments": hole("args", i)}}
        custom = call.get("custom")
        if call.get("type") == "custom" and isinstance(custom, dict):
            name, text = custom.get("name"), custom.get("input")
            if isinstance(name, str) and isinstance(text, str):
                i = group.add(_parts.tool_part(name, call["id"], text))
                return {**call, "id": hole("call_id", i),
                        "custom": {**custom, "name": hole("tool_name", i),
                                   "input": hole("input", i)}}
    return FORMAT.keep_raw(group, call)


def _chat_file(part: Part, url: str, mt: str) -> JSON | None:
    split = _parts.split_data_url(url)
    if mt.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    if mt in _AUDIO_FORMATS and split is not None:
        return {"type": "input_audio",
                "input_audio": {"data": split[1], "format": _AUDIO_FORMATS[mt]}}
    if split is not None:
        file: dict[str, Any] = {"file_data": url}
        if isinstance(part.get("filename"), str):
            file["filename"] = part["filename"]
        return {"type": "file", "file": file}
    return None


def _chat_blocks(parts: list[Part]) -> list[JSON]:
    return _parts.render_parts(parts, lambda text: {"type": "text", "text": text}, _chat_file,
                              FORMAT.raw_value)


def _chat_canonical(message: Message) -> list[JSON]:
    role = message.get("role")
    parts = _parts.message_parts(message)
    if role == "assistant":
        out: list[JSON] = []
        for step in _parts.split_steps(parts):
            tools = [p for p in step if _parts.is_tool(p)]
            texts = _parts.texts_of(step)
            msg: dict[str, Any] = {"role": "assistant",
                                   "content": "".join(texts) if texts else None}
            if tools:
                msg["tool_calls"] = [
                    {"id": p.get("toolCallId"), "type": "function",
                     "function": {"name": _parts.name_of(p), "arguments": _parts.arguments(p)}}
                    for p in tools if _parts.has_call(p)
                ]
                if not msg["tool_calls"]:
                    del msg["tool_calls"]
            if msg["content"] is not None or "tool_calls" in msg:
                out.append(msg)
            for p in tools:
                text = _parts.output_text(p)
                if text is not None:
                    out.append({"role": "tool", "tool_call_id": p.get("toolCallId"),
                                "content": text})
        return out
    if role == "system":
        return [{"role": "system", "content": "\n\n".join(_parts.texts_of(parts))}]
    blocks = _chat_blocks(parts)
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
    return FORMAT.render(messages, _chat_canonical)
