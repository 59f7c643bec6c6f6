"""The API reference (docs/reference/) names every public name: each public module has its
``:::`` directive, listing every name of its ``__all__``, so a new export cannot go undocumented.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


PUBLIC_MODULES = {
    "convostore": "convostore.md",
    "convostore.aio": "aio.md",
    "convostore.errors": "errors.md",
    "convostore.model": "model.md",
    "convostore.limits": "limits.md",
    "convostore.codec": "codec.md",
    "convostore.tokens": "tokens.md",
    "convostore.compaction": "compaction.md",
    "convostore.dump": "dump.md",
    "convostore.manager": "manager.md",
    "convostore.context": "context.md",
    "convostore.formats": "formats.md",
    "convostore.web": "web.md",
    "convostore.cli": "cli.md",
    "convostore.integrations": "integrations.md",
    "convostore.integrations.openai_agents": "integrations.md",
    "convostore.integrations.langchain": "integrations.md",
    "convostore.integrations.pydantic_ai": "integrations.md",
    "convostore.integrations.langgraph": "integrations.md",
    "convostore.backends.sqlite": "backends.md",
    "convostore.backends.postgres": "backends.md",
}
if importlib.util.find_spec("convostore.mcp") is not None:
    PUBLIC_MODULES["convostore.mcp"] = "mcp.md"


def _directives(page: str) -> dict[str, list[str] | None]:
    """Each ``::: module`` of a reference page, with its ``members`` list (None: no list)."""
    found: dict[str, list[str] | None] = {}
    current = None
    for line in (DOCS / "reference" / page).read_text(encoding="utf-8").splitlines():
        if line.startswith("::: "):
            current = line[4:].strip()
            found[current] = None
        elif current and re.match(r"\s+- ", line):
            members = found[current] or []
            members.append(line.strip()[2:])
            found[current] = members
        elif line and not line.startswith(" "):
            current = None
    return found


@pytest.mark.parametrize("module", sorted(PUBLIC_MODULES))
def test_reference_lists_every_public_name(module: str) -> None:
    directives = _directives(PUBLIC_MODULES[module])
    assert module in directives, f"docs/reference/{PUBLIC_MODULES[module]} has no ::: {module}"
    exported = getattr(importlib.import_module(module), "__all__", None)
    if exported is not None:
        assert directives[module] == list(exported), f"members of ::: {module} != its __all__"

