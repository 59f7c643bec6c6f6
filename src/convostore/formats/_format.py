"""One format's name and provider, bound to the helpers that record or check them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..model import Message
from ._fill import fill
from ._layout import Builder, Group, hole
from ._parts import JSON, KEY, RAW_PART_TYPE, Mismatch, Part, message_parts, tag


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
