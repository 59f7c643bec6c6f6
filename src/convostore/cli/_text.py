"""How the command line shows stored data: control characters made visible, sizes, times,
one-line previews of messages and parts, and the plain or rich output stream.

Everything a human reads goes through :class:`Output`, which renders every control character
visibly (:func:`visible`): stored session ids, message ids, roles and text come from whoever
wrote them, and an escape sequence printed raw could retitle the operator's terminal, forge
lines or links. Machine output (``convostore export``) is written as it is stored, never here.
"""

from __future__ import annotations

import importlib
import re
from datetime import datetime, timezone
from typing import IO, Any

from .. import codec
from ..messages._parts import parse_data_url, tool_name
from ..model import Message, is_tool_type

PREVIEW = 72
"""Characters of text shown in a one-line preview."""

_INVISIBLE = re.compile(
    "[\\x00-\\x1f\\x7f-\\x9f\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069"
    "\\ud800-\\udfff]"
)
"""C0 and C1 controls and DEL, bidirectional overrides (they reorder what follows), line and
paragraph separators, and lone surrogates (which no terminal encoding can write)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with each control character written as its escape: ``\\x1b``, ``\\u202e``."""
    return _INVISIBLE.sub(_escape, text)


class Output:
    """Plain text, or rich-styled text when rich is importable and the stream is a terminal.

    Every line and table cell is passed through :func:`visible`; rich never reads markup in
    it (a stored ``[link=...]`` stays text).
    """

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.console: Any = None  # a rich Console, or None for plain text
        self._table: Any = None
        self._text: Any = None
        if stream.isatty():
            try:
                console = importlib.import_module("rich.console")
                self._table = importlib.import_module("rich.table").Table
                self._text = importlib.import_module("rich.text").Text
            except ImportError:
                return
            self.console = console.Console(file=stream, soft_wrap=True, highlight=False,
                                           emoji=False)

    def line(self, text: str = "", style: str | None = None) -> None:
        """Write one line (``style`` is a rich style, ignored in plain text)."""
        text = visible(text)
        if self.console is not None:
            self.console.print(text, style=style, markup=False)
        else:
            self.stream.write(text + "\n")

    def heading(self, text: str) -> None:
        """A section title, after a blank line."""
        self.line()
        self.line(text if self.console is not None else f"== {text} ==", style="bold cyan")

    def table(self, headers: list[str] | None, rows: list[list[str]]) -> None:
        """Rows in aligned columns, under ``headers`` if given (the last column is not padded)."""
        rows = [[visible(cell) for cell in row] for row in rows]
        if self.console is not None:
            table = self._table(*(headers or [""] * len(rows[0])), box=None, pad_edge=False,
                                show_header=headers is not None)
            for row in rows:
                table.add_row(*(self._text(cell) for cell in row))  # Text: no markup read
            self.console.print(table)
            return
        lines = [headers, *rows] if headers else rows
        widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
        for row in lines:
            cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths[:-1], strict=True)]
            cells.append(row[-1])
            self.stream.write("  ".join(cells).rstrip() + "\n")


def size(n: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 KiB``, ``201.3 KiB``, ``4.0 MiB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def when(ms: int) -> str:
    """Epoch milliseconds as ``2023-11-14 22:13:20 UTC``. Stored times are 0 to
    ``MAX_TIMESTAMP_MS`` (year 9999), which all print as dates; any other value (a store
    written before that limit, or damaged) prints as ``<ms> ms since 1970``."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms since 1970"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def sid(session_id: str) -> str:
    """A session id as shown; the default session ``""`` would otherwise be invisible."""
    return session_id if session_id else '""'


def clip(text: str, width: int = PREVIEW) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def part_preview(part: object, width: int = PREVIEW) -> str:
    """One line describing a message part; text is cut to ``width`` characters."""
    if not isinstance(part, dict):
        return f"({type(part).__name__})"
    kind = str(part.get("type", "?"))
    if kind in ("text", "reasoning"):
        return f'{kind} "{clip(str(part.get("text", "")), width)}"'
    if is_tool_type(kind):
        name = tool_name(part) or "?"
        bits = [f"tool {name}", str(part.get("state", ""))]
        if "input" in part:
            bits.append("input " + clip(codec.dumps(part["input"]), width // 2))
        if "output" in part:
            bits.append("output " + size(codec.utf8_len(codec.dumps(part["output"]))))
        return " ".join(b for b in bits if b)
    if kind == "file":
        url = str(part.get("url", ""))
        bits = ["file", str(part.get("mediaType", "?"))]
        if isinstance(part.get("filename"), str):
            bits.append(part["filename"])
        header = parse_data_url(url)
        if header is not None:
            data = url[header.comma + 1 :]
            bits.append(size(len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))))
        elif url:
            bits.append(clip(url, 40))
        return " ".join(bits)
    if kind == "source-url":
        return f"source-url {clip(str(part.get('url', '')), 60)}"
    return kind


def label(message: Message) -> str:
    """``id role: preview · preview``, one line (step-start parts left out)."""
    parts = message.get("parts") or []
    previews = [part_preview(p, 40) for p in parts]
    text = " · ".join(p for p in previews if p != "step-start") or "(no parts)"
    return f"{message['id']} {message['role']}: {text}"
