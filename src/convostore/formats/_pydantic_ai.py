"""pydantic-ai ``ModelMessage`` JSON (``ModelMessagesTypeAdapter.dump_python(messages,
mode="json")``), to and from UIMessages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..model import Message
from . import _parts
from ._format import Format
from ._layout import Builder, Group, hole, result_layout
from ._parts import JSON

FORMAT = Format("pydantic-ai", provider=None)  # pydantic-ai names the provider per part
"""This module's format: its name and provider, bound to the shared helpers."""

_URL_KINDS = {"image-url": "image/*", "document-url": "application/octet-stream",
              "audio-url": "audio/*", "video-url": "video/*"}


def _pydantic_user_item(group: Group, item: Any) -> JSON:
    if isinstance(item, str):
        return hole("text", group.add(_parts.text_part(item)))
    if isinstance(item, dict):
        kind = item.get("kind")
        if kind == "binary" and isinstance(item.get("data"), str) and isinstance(
            item.get("media_type"), str
        ):
            i = group.add(_parts.file_from_base64(item["data"], item["media_type"]))
            return {**item, "data": hole("b64", i)}
        if kind in _URL_KINDS and isinstance(item.get("url"), str):
            i = group.add(_parts.file_from_url(item["url"], media_type=item.get("media_type"),
                                              default=_URL_KINDS[kind]))
            return {**item, "url": hole("url", i)}
    return FORMAT.keep_raw(group, item)


def from_pydantic_ai(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """UIMessages for pydantic-ai messages in JSON form (``to_pydantic_ai`` gives them back).

    :param messages: ``ModelMessagesTypeAdapter.dump_python(messages, mode="json")``: requests
        (``system-prompt``, ``user-prompt``, ``tool-return``, ``retry-prompt`` parts) and
        responses (``text``, ``thinking``, ``tool-call`` parts); any other part is kept verbatim.
    """
    b = FORMAT.builder()
    for msg in _parts.check_list(messages, "messages"):
        msg = dict(msg)
        parts = msg.get("parts")
        parts = parts if isinstance(parts, list) else []
        if msg.get("kind") == "response":
            group = b.model(new_message=True)
            layout_parts = [_pydantic_response_part(group, p) for p in parts]
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
            layout_parts = [_pydantic_request_part(group, p, b, system_as_text)
                            for p in parts]
        group.source.append({**msg, "parts": layout_parts} if "parts" in msg else msg)
    return b.messages()


def _pydantic_request_part(
    group: Group, part: Any, b: Builder, system_as_text: bool
) -> JSON:
    if isinstance(part, dict):
        kind = part.get("part_kind")
        content = part.get("content")
        if kind == "user-prompt":
            if isinstance(content, list):
                return {**part, "content": [_pydantic_user_item(group, c) for c in content]}
            if isinstance(content, str):
                return {**part, "content": hole("text", group.add(_parts.text_part(content)))}
        if kind == "system-prompt" and system_as_text and isinstance(content, str):
            return {**part, "content": hole("text", group.add(_parts.text_part(content)))}
        if kind in ("tool-return", "retry-prompt") and (
            kind == "tool-return" or isinstance(part.get("tool_name"), str)
        ):
            return result_layout(b, group, part, id_key="tool_call_id", output_key="content",
                                       name=part.get("tool_name"), error=kind == "retry-prompt")
    return FORMAT.keep_raw(group, part)


def _pydantic_response_part(group: Group, part: Any) -> JSON:
    if isinstance(part, dict):
        kind = part.get("part_kind")
        content = part.get("content")
        if kind == "text" and isinstance(content, str):
            return {**part, "content": hole("text", group.add(_parts.text_part(content)))}
        if kind == "thinking" and isinstance(content, str):
            provider = part.get("provider_name")
            if not isinstance(provider, str):
                provider = "pydantic-ai"
            i = group.add(FORMAT.reasoning_part(content, part, provider))
            return hole("item", i)
        if kind == "tool-call" and isinstance(part.get("tool_name"), str) and isinstance(
            part.get("tool_call_id"), str
        ):
            args = part.get("args")
            layout = {**part, "tool_name": None, "tool_call_id": None}
            if isinstance(args, str):
                value, kept = _parts.parse_arguments(args)
                i = group.add(
                    _parts.tool_part(part["tool_name"], part["tool_call_id"], value, kept))
                layout["args"] = hole("args", i)
            else:
                i = group.add(_parts.tool_part(part["tool_name"], part["tool_call_id"], args))
                layout["args"] = hole("input", i)
            layout["tool_name"] = hole("tool_name", i)
            layout["tool_call_id"] = hole("call_id", i)
            return layout
    return FORMAT.keep_raw(group, part)


def _pydantic_canonical(message: Message) -> list[JSON]:
    role = message.get("role")
    parts = _parts.message_parts(message)
    if role == "system":
        texts = _parts.texts_of(parts)
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
                split = _parts.split_data_url(url)
                if split is not None:
                    content.append({"kind": "binary", "data": split[1], "media_type": split[0]})
                else:
                    url_kind = next((k for k, v in _URL_KINDS.items()
                                     if mt.split("/")[0] == v.split("/")[0]), "document-url")
                    content.append({"kind": url_kind, "url": url})
            elif kind == _parts.RAW_PART_TYPE:
                value = FORMAT.verbatim(part)
                if value is not None:
                    raw.append(value)
        request_parts: list[Any] = list(raw)
        if content:
            single = len(content) == 1 and isinstance(content[0], str)
            request_parts.append({"part_kind": "user-prompt",
                                  "content": content[0] if single else content})
        return [{"kind": "request", "parts": request_parts}] if request_parts else []
    out: list[JSON] = []
    for step in _parts.split_steps(parts):
        response: list[Any] = []
        results: list[Any] = []
        for part in step:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                response.append({"part_kind": "text", "content": part["text"]})
            elif kind == "reasoning":
                value = FORMAT.verbatim(part)
                if value is None and _parts.tag(part) is None and isinstance(part.get("text"), str):
                    value = {"part_kind": "thinking", "content": part["text"]}
                if value is not None:
                    response.append(value)
            elif kind == _parts.RAW_PART_TYPE:
                value = FORMAT.verbatim(part)
                if value is not None:
                    response.append(value)
            elif _parts.is_tool(part):
                name, call_id = _parts.name_of(part), part.get("toolCallId")
                if _parts.has_call(part):
                    meta = part.get("callProviderMetadata")
                    kept = isinstance(meta, dict) and isinstance(meta.get(_parts.KEY), dict)
                    response.append({"part_kind": "tool-call", "tool_name": name,
                                     "args": _parts.arguments(part) if kept else part.get("input"),
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
    return FORMAT.render(messages, _pydantic_canonical)
