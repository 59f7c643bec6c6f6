"""The code blocks of the README, the tutorial and the how-to guides run: the pages cannot drift.

Each page's ```python blocks run in order in one namespace, in a temporary directory (so
``Sessions.open("chat.db")`` makes a fresh SQLite file there). A block that needs what a test
run does not have (a server, a model provider) carries a marker on the line before its fence:

    <!-- docs-test: skip: the reason, shown in the test report -->
    <!-- docs-test: needs fastapi -->          (runs when the module imports, else skips)

Skipped blocks are test items of their own, so every reason shows in the report. The reference
pages are checked too: each public module has its ``:::`` directive, listing every name of its
``__all__``.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import importlib.util
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import convostore

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [
    ROOT / "README.md",
    DOCS / "index.md",
    DOCS / "tutorial.md",
    *sorted((DOCS / "guides").glob("*.md")),
]

_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!--\s*docs-test:\s*(skip|needs)\s*:?\s*(.*?)\s*-->\s*\Z", re.S)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    code: str
    skip: str | None  # the reason this block does not run here, else None


def _blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = None
        marker = _MARKER.search(before)
        if marker and marker.group(1) == "skip":
            skip = f"skipped by design: {marker.group(2)}"
        elif marker:
            module = marker.group(2)
            if importlib.util.find_spec(module) is None:
                skip = f"needs {module} (pip install -e '.[docs]')"
        line = text.count("\n", 0, match.start()) + 2
        name = str(path.relative_to(ROOT))
        blocks.append(Block(name, line, match.group(1), skip))
    return blocks


ALL = [block for path in PAGES for block in _blocks(path)]


def test_the_pages_have_blocks() -> None:
    # the glob above must find the pages: a moved folder would otherwise test nothing
    assert len(PAGES) >= 10 and len(ALL) >= 25


def _close_stores(namespace: dict[str, object]) -> None:
    for value in list(namespace.values()):
        if isinstance(value, convostore.Sessions) and not value.closed:
            value.close()
        elif isinstance(value, convostore.AsyncSessions) and not value.closed:
            closing = value.close()
            if inspect.isawaitable(closing):
                asyncio.run(closing)


RUNNABLE = sorted({block.page for block in ALL if block.skip is None})


@pytest.mark.parametrize("page", RUNNABLE)
def test_page_blocks_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    try:
        for block in _blocks(ROOT / page):
            if block.skip is not None:
                continue
            source = "\n" * (block.line - 1) + block.code  # tracebacks name the page's line
            code = compile(source, str(ROOT / page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            if code.co_flags & inspect.CO_COROUTINE:
                asyncio.run(eval(code, namespace))
            else:
                exec(code, namespace)
    finally:
        _close_stores(namespace)


@pytest.mark.parametrize(
    "block",
    [b for b in ALL if b.skip is not None],
    ids=lambda b: f"{b.page}:{b.line}",
)
def test_block_not_run_here(block: Block) -> None:
    # Compiles, so a skipped block still cannot hold a syntax error; then says why it skips.
    compile(block.code, block.page, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert block.skip is not None
    pytest.skip(block.skip)


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
    "convostore.check": "check.md",
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
    "convostore.integrations.adk": "integrations.md",
    "convostore.integrations.llama_index": "integrations.md",
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
    page = DOCS / "reference" / PUBLIC_MODULES[module]
    assert page.exists(), f"{module} has no reference page: add {page.name} to the nav"
    directives = _directives(PUBLIC_MODULES[module])
    assert module in directives, f"docs/reference/{PUBLIC_MODULES[module]} has no ::: {module}"
    exported = getattr(importlib.import_module(module), "__all__", None)
    if exported is not None:
        assert directives[module] == list(exported), f"members of ::: {module} != its __all__"


def test_readme_stays_a_front_door() -> None:
    # issue 44: a short README whose links all lead into the repository's pages
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert targets
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert missing == []
