"""The model's memory tools as provider-neutral definitions, and entry-key generation (§10.5).

Definitions are plain data (name, description, JSON Schema) built from the loaded blocks; the
helpers render them for the OpenAI Chat Completions and Anthropic Messages tool formats. Running a
tool is the context's job (:meth:`Context.execute`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._blocks import ContextBlock

SET_CONTEXT = "set_context"
LOAD_CONTEXT = "load_context"
UNLOAD_CONTEXT = "unload_context"
SEARCH_CONTEXT = "search_context"

UNLOADED_MARKER = "[skill unloaded: {key}]"
"""What an unloaded skill's ``load_context`` output is rewritten to in the history."""

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_SLUG_UNITS = 60
_NON_SLUG = re.compile(r"[^a-z0-9]+")
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


@dataclass(frozen=True)
class ToolDefinition:
    """One tool the model may call: its name, what it does, and its input as JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """A JSON Schema object describing the arguments."""


def to_openai_tools(definitions: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """The definitions in the OpenAI Chat Completions format.

    :param definitions: what :meth:`Context.tools` returned.
    :returns: ``[{"type": "function", "function": {"name", "description", "parameters"}}]``.
    """
    return [
        {
            "type": "function",
            "function": {
                "name": d.name,
                "description": d.description,
                "parameters": dict(d.parameters),
            },
        }
        for d in definitions
    ]


def to_anthropic_tools(definitions: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """The definitions in the Anthropic Messages format.

    :param definitions: what :meth:`Context.tools` returned.
    :returns: ``[{"name", "description", "input_schema"}]``.
    """
    return [
        {"name": d.name, "description": d.description, "input_schema": dict(d.parameters)}
        for d in definitions
    ]


# --- entry keys --------------------------------------------------------------------------------


def fnv1a_32(text: str) -> int:
    """32-bit FNV-1a over the UTF-16 code units of ``text`` (as the reference hashes strings)."""
    h = _FNV_OFFSET
    units = memoryview(text.encode(_UTF16, "surrogatepass")).cast("H")
    for unit in units:
        h = ((h ^ unit) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def base36(n: int) -> str:
    """A non-negative integer in base 36, lower-case (JavaScript ``n.toString(36)``)."""
    if n == 0:
        return "0"
    digits = []
    while n:
        n, r = divmod(n, 36)
        digits.append(_BASE36[r])
    return "".join(reversed(digits))


def short_hash(text: str) -> str:
    """``fnv1a_32(text)`` in base 36."""
    return base36(fnv1a_32(text))


def slugify(text: str) -> str:
    """The first 60 UTF-16 code units, lower-cased, non ``[a-z0-9]`` runs as ``-``, trimmed."""
    head = text.encode("utf-16-le", "surrogatepass")[: _SLUG_UNITS * 2]
    cut = head.decode("utf-16-le", "surrogatepass")
    return _NON_SLUG.sub("-", cut.lower()).strip("-")


def entry_key(content: str, title: str | None = None) -> str:
    """The key ``set_context`` files a keyed entry under.

    A non-blank ``title`` gives its slug (``entry-<hash(title)>`` if that is empty), so writes
    with the same title replace one entry; otherwise ``<slug(content) or "entry">-<hash(content)>``.
    """
    if title is not None and title.strip():
        return slugify(title) or f"entry-{short_hash(title)}"
    return f"{slugify(content) or 'entry'}-{short_hash(content)}"


# --- definitions -------------------------------------------------------------------------------


def _kind(block: ContextBlock) -> str:
    if block.is_skill:
        return "skill collection, keyed entries"
    if block.is_searchable:
        return "searchable, keyed entries"
    return "writable"


def _is_keyed(block: ContextBlock) -> bool:
    return block.is_skill or block.is_searchable


def build_tools(blocks: Iterable[ContextBlock], loaded: Iterable[str]) -> list[ToolDefinition]:
    """The tools the blocks call for: ``set_context`` when any is writable, ``load_context`` and
    ``unload_context`` when any is a skill block, ``search_context`` when any is searchable.

    :param loaded: the loaded skills as ``label:key``, listed in ``unload_context``.
    """
    blocks = list(blocks)
    tools: list[ToolDefinition] = []
    writable = [b for b in blocks if b.writable]
    if writable:
        keyed = any(_is_keyed(b) for b in writable)
        lines = [
            "Write to a context block of your system prompt. Writes are saved durably at once; "
            "the system prompt shows them from its next refresh.",
            "",
            "Available blocks:",
        ]
        lines += [
            f'- "{b.label}" ({_kind(b)}): {b.description or "no description"}' for b in writable
        ]
        if keyed:
            lines += [
                "",
                "A keyed block stores one entry per write. Optionally pass metadata: "
                "{ title, description }: the title becomes the entry key, so a later write with "
                "the same title replaces that entry; without one, the key is made from the "
                "content.",
            ]
        properties: dict[str, Any] = {
            "label": {
                "type": "string",
                "enum": [b.label for b in writable],
                "description": "The block to write to.",
            },
            "content": {"type": "string", "description": "The text to write."},
            "action": {
                "type": "string",
                "enum": ["replace", "append"],
                "description": "replace (the default) overwrites the block; append adds to it. "
                "Not used by keyed blocks.",
            },
        }
        if keyed:
            properties["metadata"] = {
                "type": "object",
                "description": "For keyed blocks only.",
                "properties": {
                    "title": {"type": "string", "description": "Names the entry (its key)."},
                    "description": {
                        "type": "string",
                        "description": "A one-line summary shown in the skill listing.",
                    },
                },
            }
        tools.append(
            ToolDefinition(
                SET_CONTEXT,
                "\n".join(lines),
                {"type": "object", "properties": properties, "required": ["label", "content"]},
            )
        )
    skills = [b.label for b in blocks if b.is_skill]
    if skills:

        def key_schema() -> dict[str, Any]:
            return {
                "type": "object",
                "properties": {
                    "label": {
                        "type": "string",
                        "enum": list(skills),
                        "description": "The skill block.",
                    },
                    "key": {"type": "string", "description": "The document's key, as listed."},
                },
                "required": ["label", "key"],
            }

        tools.append(
            ToolDefinition(
                LOAD_CONTEXT,
                "Load the full text of a document from a skill block, by the key shown in the "
                "block's listing in your system prompt.",
                key_schema(),
            )
        )
        loaded = list(loaded)
        state = (
            f" Currently loaded: {', '.join(loaded)}."
            if loaded
            else " No skills currently loaded."
        )
        tools.append(
            ToolDefinition(
                UNLOAD_CONTEXT,
                "Unload a document loaded with load_context, to free context space; its text in "
                "the conversation is replaced by a short marker and it can be loaded again."
                + state,
                key_schema(),
            )
        )
    searchable = [b.label for b in blocks if b.is_searchable]
    if searchable:
        tools.append(
            ToolDefinition(
                SEARCH_CONTEXT,
                "Search a searchable context block; returns the best matching entries, each "
                "under its [key].",
                {
                    "type": "object",
                    "properties": {
                        "label": {
                            "type": "string",
                            "enum": searchable,
                            "description": "The block to search.",
                        },
                        "query": {"type": "string", "description": "Words to look for."},
                    },
                    "required": ["label", "query"],
                },
            )
        )
    return tools
