"""OpenAI Responses ``input`` items (what the Agents SDK keeps in sessions), to and from
UIMessages."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from ..model import Message
from . import _parts
from ._format import Format
from ._layout import Group, content_layout, file_data_hole, hole, result_layout
from ._parts import JSON, Part

FORMAT = Format("openai-responses", provider="openai")
"""This module's format: its name and provider, bound to the shared helpers."""

_INPUT_ROLES = ("user", "system", "developer")


def _responses_block(group: Group, block: Any) -> JSON:
    if isinstance(block, dict):
        kind = block.get("type")
        if kind in ("input_text", "output_text") and isinstance(block.get("text"), str):
            i = group.add(_parts.text_part(block["text"]))
            return {**block, "text": hole("text", i)}
        if kind == "input_image" and isinstance(block.get("image_url"), str):
            i = group.add(_parts.file_from_url(block["image_url"], default="image/*"))
            return {**block, "image_url": hole("url", i)}
        if kind == "input_file":
            data, url, name = block.get("file_data"), block.get("file_url"), block.get("filename")
            if isinstance(data, str):
                return {**block, "file_data": file_data_hole(group, data, name)}
            if isinstance(url, str):
                i = group.add(_parts.file_from_url(url, filename=name))
                return {**block, "file_url": hole("url", i)}
    return FORMAT.keep_raw(group, block)


def _responses_message(group: Group, item: dict[str, Any]) -> JSON:
    if "content" not in item:
        return item
    block = functools.partial(_responses_block, group)
    return {**item, "content": content_layout(group, item["content"], block)}


def from_openai_responses(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """UIMessages for OpenAI Responses input items (``to_openai_responses`` gives them back).

    :param items: dicts shaped like ``ResponseInputItemParam``: messages (``input_text``,
        ``input_image``, ``input_file``, ``output_text``), ``reasoning``, ``function_call``,
        ``function_call_output``, ``custom_tool_call``, ``compaction`` and any other type
        (kept verbatim).
    """
    b = FORMAT.builder()
    for item in _parts.check_list(items, "items"):
        item = dict(item)
        kind = item.get("type", "message" if "role" in item else None)
        role = item.get("role")
        if kind == "message" and role in _INPUT_ROLES:
            group = b.standalone("system" if role != "user" else "user")
            group.source.append(_responses_message(group, item))
        elif kind == "message" and role == "assistant":
            group = b.model(new_message=False)
            group.source.append(_responses_message(group, item))
        elif kind == "reasoning":
            group = b.model(new_message=False)
            i = group.add(FORMAT.reasoning_part(_reasoning_text(item), item))
            group.source.append(hole("item", i))
        elif kind in ("function_call", "custom_tool_call"):
            group = b.model(new_message=False)
            group.source.append(_responses_call(group, item))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            group = b.results()
            group.source.append(result_layout(b, group, item, id_key="call_id",
                                                    output_key="output", name=item.get("name")))
        elif kind == "compaction":
            group = b.standalone("assistant")
            group.source.append(FORMAT.keep_raw(group, item))
        else:
            group = b.model(new_message=False)
            group.source.append(FORMAT.keep_raw(group, item))
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


def _responses_call(group: Group, item: dict[str, Any]) -> JSON:
    call_id, name = item.get("call_id"), item.get("name")
    if isinstance(call_id, str) and isinstance(name, str):
        if item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
            value, kept = _parts.parse_arguments(item["arguments"])
            i = group.add(_parts.tool_part(name, call_id, value, kept))
            return {**item, "call_id": hole("call_id", i), "name": hole("tool_name", i),
                    "arguments": hole("args", i)}
        if item.get("type") == "custom_tool_call" and isinstance(item.get("input"), str):
            i = group.add(_parts.tool_part(name, call_id, item["input"]))
            return {**item, "call_id": hole("call_id", i), "name": hole("tool_name", i),
                    "input": hole("input", i)}
    return FORMAT.keep_raw(group, item)


def _responses_file(part: Part, url: str, mt: str) -> JSON:
    if mt.startswith("image/"):
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    block: dict[str, Any] = {"type": "input_file"}
    if isinstance(part.get("filename"), str):
        block["filename"] = part["filename"]
    block["file_data" if url.startswith("data:") else "file_url"] = url
    return block


def _responses_canonical(message: Message) -> list[JSON]:
    role = message.get("role")
    parts = _parts.message_parts(message)
    if role != "assistant":
        blocks = _parts.render_parts(parts, lambda text: {"type": "input_text", "text": text},
                                    _responses_file, FORMAT.raw_value)
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
            text = _parts.output_text(p)
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
        if _parts.is_tool(part):
            flush_text()
            if _parts.has_call(part):
                out.append({"type": "function_call", "call_id": part.get("toolCallId"),
                            "name": _parts.name_of(part), "arguments": _parts.arguments(part)})
            pending.append(part)
            continue
        flush()
        if kind == "text" and isinstance(part.get("text"), str):
            text.append(part["text"])
        elif kind in ("reasoning", _parts.RAW_PART_TYPE):
            value = FORMAT.verbatim(part)
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
    return FORMAT.render(messages, _responses_canonical)
