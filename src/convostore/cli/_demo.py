"""The ``demo`` command: a realistic agent conversation written into a new database (a tool
call with a large result, an image, a branch, a compaction by a local summariser), then shown
with the reading commands' printers."""

from __future__ import annotations

import argparse
import base64
import os
import shlex
import struct
import zlib
from typing import Any

from .. import codec
from ..backends._engines import display_url, local_file
from ..compaction import create_compact_function
from ..model import Message
from ..session import Session
from ._base import PROG, CliError, open_store
from ._read import print_history, print_hits, print_stats, print_tree
from ._text import Output, clip, size

DEMO_PATH = "convostore-demo.db"
"""Where ``demo`` writes when no path is given."""
DEMO_SESSION = "demo"
"""The session the demo writes."""


def _demo_png() -> bytes:
    """A real 48x24 PNG: a bar chart of an error rate with a spike (made here, no files)."""
    heights = [3, 4, 3, 5, 4, 3, 19, 22, 6, 4, 3, 3]
    width, height, bar = 48, 24, 4
    raw = bytearray()
    for y in range(height):
        raw.append(0)  # filter type of the scanline: none
        for x in range(width):
            h = heights[x // bar]
            lit = height - y <= h and x % bar != bar - 1
            raw += bytes((220, 50, 47) if lit and h > 10 else (38, 139, 210) if lit
                         else (250, 250, 250))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def _demo_log() -> dict[str, Any]:
    """A CI job log as a tool would return it: about 200 KB of JSON."""
    steps = ["checkout", "install", "lint", "unit-tests", "build-image", "push-image", "migrate"]
    lines: list[dict[str, Any]] = []
    n = 1450
    for i in range(n):
        step = steps[i * len(steps) // n]
        minutes, seconds = divmod(i, 60)
        lines.append({
            "ts": f"2025-03-14T01:{10 + minutes:02d}:{seconds:02d}Z",
            "step": step,
            "level": "info",
            "msg": f"{step}: task {i % 97:02d} finished in {(i * 37) % 900 + 12} ms "
                   f"(worker ci-runner-{i % 4}, cache {'hit' if i % 3 else 'miss'})",
        })
    lines += [
        {"ts": "2025-03-14T02:00:02Z", "step": "migrate", "level": "info",
         "msg": "applying 0042_add_orders_index"},
        {"ts": "2025-03-14T02:00:32Z", "step": "migrate", "level": "error",
         "msg": "0042_add_orders_index: lock timeout on table orders after 30s "
                "(held by pid 8812: nightly_report)"},
        {"ts": "2025-03-14T02:00:32Z", "step": "deploy", "level": "error",
         "msg": "deploy aborted: migration failed; release 2025.03.14-1 not rolled out"},
    ]
    return {"job": "deploy-nightly", "run": 4812, "status": "failed", "exit_code": 1,
            "lines": lines}


def _demo_summarise(prompt: str) -> str:
    """A deterministic stand-in for a model: one line per summarised message (no network)."""
    body = prompt.split("=== Conversation ===", 1)[-1].split("Organise the summary", 1)[0]
    points = []
    for block in body.split("\n\n---\n\n"):
        role, _, text = block.strip().partition("\n")
        first = text.split("\n[Tool:", 1)[0]
        points.append(f"- {role.strip('[]')}: {clip(first, 100)}")
    return "## Summary (written by the demo's local summariser)\n" + "\n".join(points)


def _text(id: str, role: str, body: str) -> Message:
    return {"id": id, "role": role, "parts": [{"type": "text", "text": body}]}


def _demo_fresh_file(target: str, out: Output) -> None:
    """Delete an earlier demo database at ``target`` (only if it is a SQLite file)."""
    if os.path.isdir(target):
        raise CliError(f"{target} is a directory")
    if not os.path.exists(target):
        return
    with open(target, "rb") as f:
        head = f.read(16)
    if head and head != b"SQLite format 3\x00":
        raise CliError(f"{target} exists and is not a SQLite database; not deleting it")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(target + suffix):
            os.remove(target + suffix)
    out.line(f"removed the existing {target} to start fresh")


def cmd_demo(args: argparse.Namespace, out: Output) -> None:
    """``convostore demo``: write a realistic agent conversation, then show what it did."""
    path = local_file(args.path)
    shown = os.path.abspath(path) if path is not None else display_url(args.path)
    out.line(f"convostore demo: writing a conversation to {shown}")
    if path is not None:
        _demo_fresh_file(path, out)
    with open_store(args.path, create=True) as store:
        session = store.session(DEMO_SESSION)
        if session.get_latest_leaf() is not None:
            session.clear_messages()
            out.line(f"cleared the existing session {DEMO_SESSION!r} to start fresh")
        compacted = _write_demo(session, out)
        total = {s.session_id: s.messages for s in store.list_sessions()}[DEMO_SESSION]
        out.heading(f"Tree of session {DEMO_SESSION!r} (every message; branches drawn)")
        print_tree(out, session, total, None)
        out.heading(f"Active history (what a model is sent; a summary replaces {compacted})")
        print_history(out, session.history())
        out.heading("Storage")
        print_stats(out, store)
        out.heading('Search "lock timeout" (compacted messages are still found)')
        print_hits(out, session.search("lock timeout"))
    out.heading("Look inside")
    path = shlex.quote(display_url(args.path))  # a password is left out here too
    for command in (f"ls {path}", f"show {path} {DEMO_SESSION} --tree",
                    f"search {path} 'orders index'",
                    f"export {path} {DEMO_SESSION} > demo.jsonl"):
        out.line(f"  {PROG} {command}")


def _write_demo(session: Session, out: Output) -> str:
    """Append the demo conversation, compact it; returns the compacted range ``from..to``."""
    log = _demo_log()
    png = _demo_png()
    say = out.line
    session.append_message(_text(
        "u1", "user", "The nightly deploy failed around 02:00 UTC. Can you check the build log "
        "and tell me what broke?"))
    say("  u1        user: a question")
    session.append_message({"id": "a1", "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "text", "text": "Let me pull the log of last night's run."},
        {"type": "tool-fetch_build_log", "toolCallId": "call_fetch_1",
         "state": "output-available", "input": {"job": "deploy-nightly", "run": 4812},
         "output": log},
    ]})
    say(f"  a1        assistant: a tool call, fetch_build_log, with a "
        f"{size(codec.utf8_len(codec.dumps(log)))} JSON result")
    session.append_message(_text(
        "a2", "assistant", "Build and tests passed; the deploy failed in the migrate step. "
        "Migration 0042_add_orders_index hit a lock timeout on the orders table after 30 s, "
        "because the nightly_report job held a long transaction on it. Nothing was rolled out: "
        "production still runs the previous release."))
    say("  a2        assistant: the diagnosis")
    session.append_message({"id": "u2", "role": "user", "parts": [
        {"type": "text", "text": "Here is the error-rate graph from the dashboard. Is the "
                                 "spike related?"},
        {"type": "file", "mediaType": "image/png", "filename": "error-rate.png",
         "url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")},
    ]})
    say(f"  u2        user: an image ({len(png)} byte PNG, stored once as an attachment)")
    session.append_message(_text(
        "a3", "assistant", "Probably: the spike is at about the same time as the failure."))
    say("  a3        assistant: a first answer")
    session.append_message(_text(
        "a3-retry", "assistant", "Yes. Writes to orders queued behind the migration while it "
        "waited for the lock, and timed out: the error rate rose at 02:00 and fell at 02:00:30 "
        "when the migration gave up. It is the same lock, not a second problem."), parent_id="u2")
    say("  a3-retry  assistant: a regenerated answer, a branch under u2 (now the active one)")
    session.append_message(_text("u3", "user", "How do we keep this from happening again?"))
    session.append_message(_text(
        "a4", "assistant", "Build the index with CREATE INDEX CONCURRENTLY, set lock_timeout "
        "to 5s in migrations so they fail fast, and move the nightly report to 03:00 so it "
        "never overlaps the deploy window."))
    session.append_message(_text(
        "u4", "user", "Good. Open a ticket for that and re-run the deploy tonight."))
    session.append_message(_text(
        "a5", "assistant", "Done: ticket OPS-1287 covers the migration change and the report "
        "schedule; the deploy is queued for 22:00 UTC."))
    say("  u3 a4 u4 a5: two more turns")
    # A tiny budget keeps only the last turn (u4, a5) verbatim, so the compaction is visible.
    session.on_compaction(create_compact_function(_demo_summarise, keep_recent_tokens=50))
    result = session.compact()
    if result is None:  # the function above always returns a summary for this history
        raise CliError("the demo compaction did not happen")
    compacted = f"{result.from_message_id}..{result.to_message_id}"
    say(f"  compacted {compacted} into a summary (local summariser, no network); "
        "the rows stay, reads show the summary")
    return compacted
