"""Anthropic Messages ``messages`` and the ``system`` parameter, to and from UIMessages."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from ..messages._parts import compact_json
from ..model import Message
from . import _parts
from ._fill import fill
from ._format import Format
from ._layout import Builder, Group, content_layout, hole, result_layout
from ._parts import JSON, Part

FORMAT = Format("anthropic", provider="anthropic")
"""This module's format: its name and provider, bound to the shared helpers."""

def _anthropic_block(group: Group, block: Any, b: Builder | None = None) -> JSON:
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            i = group.add(_parts.text_part(block["text"]))
            return {**block, "text": hole("text", i)}
        if kind in ("image", "document") and isinstance(block.get("source"), dict):
            source = block["source"]
            stype = source.get("type")
            if stype == "base64" and isinstance(source.get("data"), str) and isinstance(
                source.get("media_type"), str
            ):
                i = group.add(_parts.file_from_base64(source["data"], source["media_type"],
                                                     block.get("title")))
                return {**block, "source": {**source, "data": hole("b64", i)}}
            if stype == "url" and isinstance(source.get("url"), str):
                default = "image/*" if kind == "image" else "application/pdf"
                i = group.add(_parts.file_from_url(source["url"], default=default))
                return {**block, "source": {**source, "url": hole("url", i)}}
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            i = group.add(FORMAT.reasoning_part(block["thinking"], block))
            return hole("item", i)
        if kind == "redacted_thinking":
            i = group.add(FORMAT.reasoning_part("", block))
            return hole("item", i)
        if kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(
            block.get("name"), str
        ) and "input" in block:
            i = group.add(_parts.tool_part(block["name"], block["id"], block["input"]))
            return {**block, "id": hole("call_id", i), "name": hole("tool_name", i),
                    "input": hole("input", i)}
        if kind == "tool_result" and b is not None:
            return result_layout(b, group, block, id_key="tool_use_id", output_key="content",
                                       error=block.get("is_error") is True)
    return FORMAT.keep_raw(group, block)


def _anthropic_content(group: Group, content: Any, b: Builder | None = None) -> JSON:
    """The layout of a message's (or the ``system`` parameter's) content; ``b`` pairs results."""
    block = functools.partial(_anthropic_block, group, b=b)
    return content_layout(group, content, block)


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
    b = FORMAT.builder()
    if system is not None:
        group = b.standalone("system")
        group.source.append(_anthropic_content(group, system))
    for msg in _parts.check_list(messages, "messages"):
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
            layout["content"] = _anthropic_content(group, content, b)
        group.source.append(layout)
    messages_out = b.messages()
    if system is not None:
        meta = messages_out[0]["metadata"][_parts.KEY]
        meta["system"] = meta.pop("source")[0]
    return messages_out


def _anthropic_blocks(parts: list[Part], *, assistant: bool) -> list[JSON]:
    def file(part: Part, url: str, mt: str) -> JSON | None:
        block_type = "image" if mt.startswith("image/") else "document"
        if assistant or (block_type == "document" and mt != "application/pdf"):
            return None
        split = _parts.split_data_url(url)
        source: dict[str, Any] = (
            {"type": "base64", "media_type": split[0], "data": split[1]} if split
            else {"type": "url", "url": url}
        )
        return {"type": block_type, "source": source}

    def other(part: Part) -> JSON | None:
        if _parts.is_tool(part) and assistant:
            if not _parts.has_call(part):
                return None
            return {"type": "tool_use", "id": part.get("toolCallId"),
                    "name": _parts.name_of(part), "input": part.get("input")}
        if part.get("type") in ("reasoning", _parts.RAW_PART_TYPE):
            return FORMAT.verbatim(part)
        return None

    return _parts.render_parts(parts, lambda text: {"type": "text", "text": text}, file, other)


def _tool_result_block(part: Part) -> JSON | None:
    state = part.get("state")
    if state == "output-available":
        return {"type": "tool_result", "tool_use_id": part.get("toolCallId"),
                "content": part.get("output") if isinstance(part.get("output"), (str, list))
                else compact_json(part.get("output"))}
    if state == "output-error":
        return {"type": "tool_result", "tool_use_id": part.get("toolCallId"),
                "content": part.get("errorText", ""), "is_error": True}
    return None


def _anthropic_canonical(message: Message) -> list[JSON]:
    role = message.get("role")
    parts = _parts.message_parts(message)
    if role == "system":
        return []
    if role != "assistant":
        blocks = _anthropic_blocks(parts, assistant=False)
        results = [r for r in (_tool_result_block(p) for p in parts if _parts.is_tool(p)) if r]
        blocks = results + blocks
        if not blocks:
            return []
        if len(blocks) == 1 and blocks[0].get("type") == "text":
            return [{"role": "user", "content": blocks[0]["text"]}]
        return [{"role": "user", "content": blocks}]
    out: list[JSON] = []
    for step in _parts.split_steps(parts):
        blocks = _anthropic_blocks(step, assistant=True)
        if blocks:
            out.append({"role": "assistant", "content": blocks})
        results = [r for r in (_tool_result_block(p) for p in step if _parts.is_tool(p)) if r]
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
    return FORMAT.render(kept, _anthropic_canonical)


def _is_system(message: Message) -> bool:
    layout = FORMAT.layout(message)
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
        layout = FORMAT.layout(message)
        if layout is not None and "system" in layout:
            try:
                values.append(fill(layout["system"], _parts.message_parts(message)))
                continue
            except _parts.Mismatch:
                pass
        values.append("\n\n".join(_parts.texts_of(_parts.message_parts(message))))
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
