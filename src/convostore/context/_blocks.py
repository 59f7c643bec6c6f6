"""Context blocks as data, and the plain-text system prompt rendered from them.

Everything here is pure: no provider is called and nothing is stored. The rendering is the
reference's byte for byte, so a prompt frozen by another implementation compares equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ConvostoreError

SEPARATOR = "\u2550" * 46
"""The line above and below each block header: 46 × ``═`` (U+2550)."""


class ContextError(ConvostoreError, ValueError):
    """A context block operation was refused; the message is the reference's, word for word.

    Raised for writes to a readonly or unknown block, a keyed block written as a whole, a write
    over ``max_tokens``, a duplicate label, or a skill/search operation on a block of another
    kind. The model tools turn it into an ``Error: <message>`` string instead.
    """

    def __init__(self, message: str, label: str | None = None) -> None:
        super().__init__(message, label)
        self.message = message
        self.label = label
        """The label of the block concerned, when there is one."""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ContextBlockConfig:
    """How to build one block: what :meth:`Context.with_context` records.

    :param label: the block's name; upper-cased in the prompt, used by the model's tools.
    :param description: shown after the label, e.g. ``"Learned facts"``.
    :param max_tokens: limit enforced on whole-block writes; the header then shows usage.
    :param provider: where the content comes from; ``None`` means a writable block stored in the
        session's database (see :class:`StoreContextProvider`).
    """

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label:
            raise TypeError(f"a context block label must be a non-empty string, not {self.label!r}")
        if self.description is not None and not isinstance(self.description, str):
            raise TypeError(
                f"description of block {self.label!r} must be a string, not "
                f"{type(self.description).__name__}"
            )
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int)
        ):
            raise TypeError(
                f"max_tokens of block {self.label!r} must be an int, not "
                f"{type(self.max_tokens).__name__}"
            )


@dataclass(frozen=True)
class ContextBlock:
    """A loaded block as the model's tools and the prompt see it.

    ``tokens`` is the estimate of ``content``; ``writable`` is true when the provider has
    ``set``, ``is_skill`` when it has ``load``, ``is_searchable`` when it has ``search``.
    """

    label: str
    description: str | None
    content: str
    tokens: int
    max_tokens: int | None
    writable: bool
    is_skill: bool
    is_searchable: bool


def percent(tokens: int, max_tokens: int) -> int:
    """``round(tokens / max_tokens × 100)`` with halves rounded up, as JavaScript rounds."""
    return math.floor(tokens / max_tokens * 100 + 0.5)


def block_tag(block: ContextBlock) -> str:
    """Exactly one of ``[searchable]``, ``[loadable]``, ``[readonly]``, ``[writable]``."""
    if block.is_searchable:
        return "[searchable]"
    if block.is_skill:
        return "[loadable]"
    if not block.writable:
        return "[readonly]"
    return "[writable]"


def block_header(block: ContextBlock) -> str:
    """``LABEL (description) [P% — tokens/max tokens] [tag]``, parts present when set."""
    header = block.label.upper()
    if block.description:
        header += f" ({block.description})"
    if block.max_tokens:
        header += (
            f" [{percent(block.tokens, block.max_tokens)}% \u2014 "
            f"{block.tokens}/{block.max_tokens} tokens]"
        )
    return f"{header} {block_tag(block)}"


def render_system_prompt(blocks: Iterable[ContextBlock]) -> str:
    """The system prompt: each shown block as separator, header, separator, content.

    A block with empty content is left out unless it is writable, searchable or a skill block
    (so the model still sees where it can write, search or load). Blocks are joined by a blank
    line, in registration order.
    """
    rendered = [
        f"{SEPARATOR}\n{block_header(b)}\n{SEPARATOR}\n{b.content}"
        for b in blocks
        if b.content or b.writable or b.is_searchable or b.is_skill
    ]
    return "\n\n".join(rendered)


def usage_line(label: str, tokens: int, max_tokens: int | None) -> str:
    """What ``set_context`` answers after a whole-block write."""
    if max_tokens:
        return (
            f"Written to {label}. Usage: {percent(tokens, max_tokens)}% "
            f"({tokens}/{max_tokens} tokens)"
        )
    return f"Written to {label}. Usage: {tokens} tokens"
