"""The memory tools run from a model's tool call: arguments parsed and checked, the call
dispatched to the context's operations, and every outcome (an error too) answered as text."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._blocks import usage_line
from ._ops import Gen
from ._providers import is_skill
from ._tools import (
    LOAD_CONTEXT,
    SEARCH_CONTEXT,
    SET_CONTEXT,
    UNLOAD_CONTEXT,
    build_tools,
    entry_key,
)

if TYPE_CHECKING:
    from ._core import ContextCore

logger = logging.getLogger("convostore")


def parse_arguments(arguments: object) -> dict[str, Any]:
    """Tool-call arguments as a dict: a mapping, a JSON object string, or None (no arguments)."""
    if arguments is None:
        return {}
    if isinstance(arguments, (str, bytes, bytearray)):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(arguments, Mapping):
        raise ValueError("arguments must be a JSON object")
    return dict(arguments)


def _str_arg(args: Mapping[str, Any], name: str) -> str:
    if name not in args or args[name] is None:
        raise ValueError(f'missing argument "{name}"')
    value = args[name]
    if not isinstance(value, str):
        raise ValueError(f'argument "{name}" must be a string')
    return value


def execute(core: ContextCore, name: str, arguments: object) -> Gen[str]:
    """Run one memory tool call; the answer is always a string (an error is ``Error: ...``)."""
    try:
        args = parse_arguments(arguments)
        yield from core.ensure_ready()
        available = {t.name for t in build_tools(core.views(), ())}
        if name not in available:
            return f'Error: unknown tool "{name}"'
        if name == SET_CONTEXT:
            return (yield from _tool_set(core, args))
        if name == LOAD_CONTEXT:
            label, key = _str_arg(args, "label"), _str_arg(args, "key")
            document = yield from core.load_skill(label, key)
            return f"Not found: {key}" if document is None else document
        if name == UNLOAD_CONTEXT:
            label, key = _str_arg(args, "label"), _str_arg(args, "key")
            if not (yield from core.unload_skill(label, key)):
                return f'Skill "{key}" is not currently loaded in "{label}".'
            return f'Unloaded "{key}" from {label}. Context reclaimed.'
        assert name == SEARCH_CONTEXT
        label, query = _str_arg(args, "label"), _str_arg(args, "query")
        result = yield from core.search(label, query)
        return result if result else "No results found."
    except Exception as exc:
        logger.debug("context tool %s failed", name, exc_info=True)
        return f"Error: {exc}"

def _tool_set(core: ContextCore, args: dict[str, Any]) -> Gen[str]:
    label, content = _str_arg(args, "label"), _str_arg(args, "content")
    block = core.blocks.get(label)
    if block is None:
        return f'Error: block "{label}" not found'
    if block.keyed:
        metadata = args.get("metadata")
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, Mapping):
            raise ValueError('argument "metadata" must be an object')
        title, description = metadata.get("title"), metadata.get("description")
        if title is not None and not isinstance(title, str):
            raise ValueError('argument "metadata.title" must be a string')
        if description is not None and not isinstance(description, str):
            raise ValueError('argument "metadata.description" must be a string')
        key = entry_key(content, title)
        if is_skill(block.provider):
            yield from core.set_skill(
                label, key, content, description if description is not None else title
            )
        else:
            yield from core.set_search_entry(label, key, content)
        return f'Indexed "{key}" in {label}.'
    action = args.get("action")
    if action is None:
        action = "replace"
    if action not in ("replace", "append"):
        raise ValueError('argument "action" must be "replace" or "append"')
    if action == "append":
        view = yield from core.append_block(label, content)
    else:
        view = yield from core.replace_block(label, content)
    return usage_line(label, view.tokens, view.max_tokens)
