"""Attachments (issue 5): media stored once, out of line; what it costs on disk and per append.

Three scratch databases, measured in one run:

- ``distinct``: 200 messages, each carrying one distinct 200 KB image (random bytes, sent as a
  base64 ``data:`` URL in a ``file`` part) next to a short text part. Reported: the database
  size (file after a WAL checkpoint; PostgreSQL: total relation size), the stored bytes of
  ``storage_stats()``, both against the raw image bytes, and the size of the message rows.
- ``same``: 200 messages re-sending one 200 KB image: it must be stored once.
- ``text``: the same 200 messages without their image, and the raw-SQL baselines.

Append throughput (appends/s, median over rounds of 40 appends, rounds interleaved) is reported
with images and without, each against a hand-written raw-SQL append doing the least the job
needs: one transaction inserting the message JSON (and, with an image, decoding the base64,
hashing it and inserting the bytes once by hash).

Targets: ``distinct`` under 1.05x the raw image bytes, message rows under 1 KB each, ``same``
holding one attachment of 200 KB.

    python benchmarks/attachments.py
    python benchmarks/attachments.py --backend postgres --url postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import base64
import hashlib
import random
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from _common import (
    Bench,
    KiB,
    MessageGen,
    Report,
    append_rates,
    bench_parser,
    compact_json,
    fmt_bytes,
    fmt_s,
    machine_line,
    open_bench,
    progress,
)

SID = "chat"
RAW_DDL = [
    "CREATE TABLE IF NOT EXISTS bench_raw_blobs (hash TEXT PRIMARY KEY, data {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS bench_raw_messages (id TEXT PRIMARY KEY, content TEXT NOT NULL)",
]


def image_message(gen: MessageGen, i: int, image: bytes) -> dict[str, Any]:
    """A user message: a short text part and one image as a base64 data URL."""
    rng = random.Random(gen.seed * 7919 + i)
    return {
        "id": f"img-{i:04d}",
        "role": "user",
        "parts": [
            {"type": "text", "text": gen.text(rng, 50, 300)},
            {"type": "file", "mediaType": "image/png", "filename": f"screenshot-{i}.png",
             "url": "data:image/png;base64," + base64.b64encode(image).decode("ascii")},
        ],
    }


def without_image(message: dict[str, Any]) -> dict[str, Any]:
    """The same message with its file part removed."""
    return {**message, "parts": [p for p in message["parts"] if p.get("type") != "file"]}


def raw_append(bench: Bench, message: dict[str, Any]) -> None:
    """The baseline append: one transaction; media decoded, hashed and stored once by hash."""
    raw = bench.raw
    parts = []
    blobs = []
    for part in message["parts"]:
        url = part.get("url")
        if isinstance(url, str) and url.startswith("data:"):
            data = base64.b64decode(url[url.index(",") + 1 :])
            digest = hashlib.sha256(data).hexdigest()
            blobs.append((digest, data))
            part = {**part, "url": "attachment:sha256:" + digest}
        parts.append(part)
    text = compact_json({**message, "parts": parts})
    if raw.kind == "sqlite":
        raw.conn.execute("BEGIN IMMEDIATE")
        for digest, data in blobs:
            raw.conn.execute("INSERT OR IGNORE INTO bench_raw_blobs VALUES (?, ?)", (digest, data))
        raw.conn.execute("INSERT INTO bench_raw_messages VALUES (?, ?)", (message["id"], text))
        raw.conn.execute("COMMIT")
    else:
        with raw.conn.transaction():
            for digest, data in blobs:
                raw.conn.execute("INSERT INTO bench_raw_blobs VALUES (%s, %s) "
                                 "ON CONFLICT DO NOTHING", (digest, data))
            raw.conn.execute("INSERT INTO bench_raw_messages VALUES (%s, %s)",
                             (message["id"], text))


def content_length(bench: Bench) -> str:
    """SQL for the UTF-8 length in bytes of a row's ``content`` column, on the bench's engine."""
    return "length(CAST(content AS BLOB))" if bench.kind == "sqlite" else "octet_length(content)"


def row_sizes(bench: Bench, sid: str) -> tuple[int, float, int]:
    """(largest, mean) UTF-8 length of the ``content`` column of a session's message rows, and
    its continuation rows."""
    length = content_length(bench)
    largest, mean = bench.raw.rows(
        f"SELECT max({length}), avg({length}) FROM convostore_messages WHERE session_id = ?",
        (sid,))[0]
    chunks = bench.raw.value(
        "SELECT count(*) FROM convostore_message_chunks WHERE session_id = ?", (sid,))
    return int(largest), float(mean), int(chunks)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200, help="messages per case (200)")
    parser.add_argument("--image-kb", type=int, default=200, help="image size in KiB (200)")
    parser.add_argument("--round", type=int, default=40,
                        help="appends per timed round (default 40: five rounds of 200)")
    args = parser.parse_args(argv)
    if args.url and args.backend == "sqlite":
        parser.error("attachments.py uses three scratch databases; --url applies to postgres")
    report = Report("convostore attachments: stored once, out of line")
    n, size = args.messages, args.image_kb * KiB
    gen = MessageGen(args.seed, vocabulary=2_000)

    with ExitStack() as stack:
        distinct = stack.enter_context(open_bench(args, name="distinct"))
        same = stack.enter_context(open_bench(args, name="same"))
        text = stack.enter_context(open_bench(args, name="text"))
        report.header([
            f"backend {distinct.kind}; scratch databases: {distinct.where}, {same.where}, "
            f"{text.where}",
            machine_line(),
            f"{n} messages; each: a text part (50-300 chars) + one {args.image_kb} KiB image "
            "(random bytes) as a base64 data URL file part",
        ])
        empty_size = distinct.raw.size_on_disk()
        for stmt in RAW_DDL:
            text.raw.conn.execute(stmt.format(blob="BLOB" if text.kind == "sqlite" else "BYTEA"))

        progress(f"generating {n} images of {args.image_kb} KiB")
        images = [random.Random(args.seed * 104_729 + i).randbytes(size) for i in range(n)]
        messages = [image_message(gen, i, images[i]) for i in range(n)]
        shared = [image_message(gen, i, images[0]) for i in range(n)]
        plain = [without_image(m) for m in messages]
        raw_image = [{**m, "id": "raw-" + m["id"]} for m in messages]
        raw_plain = [{**m, "id": "raw-plain-" + m["id"]} for m in plain]

        # Rounds interleave the contenders so machine noise spreads over all of them.
        contenders: dict[str, tuple[Callable[[dict[str, Any]], Any], Sequence[dict[str, Any]]]] = {
            "api, distinct images": (distinct.store.session(SID).append_message, messages),
            "api, same image": (same.store.session(SID).append_message, shared),
            "api, no image": (text.store.session(SID).append_message, plain),
            "raw SQL, distinct images": (lambda m: raw_append(text, m), raw_image),
            "raw SQL, no image": (lambda m: raw_append(text, m), raw_plain),
        }
        progress(f"appending {n} messages per case, rounds of {args.round}")
        rate = append_rates(contenders, size=args.round)
        rounds = len(range(0, n, args.round))

        for bench, original in ((distinct, messages[n // 2]), (same, shared[-1])):
            back = bench.store.session(SID).get_message(original["id"])
            if back != original:
                print(f"error: message {original['id']} did not read back equal")
                return 2

        raw_bytes = n * size
        disk = distinct.raw.size_on_disk()
        stats = distinct.store.storage_stats()
        largest, mean, chunk_rows = row_sizes(distinct, SID)
        row_text = int(distinct.raw.value(
            f"SELECT sum({content_length(distinct)}) FROM convostore_messages"))
        stored = stats.attachment_bytes + row_text
        report.table(
            f"{n} messages, each with a distinct {args.image_kb} KiB image "
            f"(raw image bytes {fmt_bytes(raw_bytes)} = {raw_bytes:,} B)",
            ["measure", "value", "vs raw image bytes"],
            [
                [f"database size ({distinct.raw.size_what})", fmt_bytes(disk),
                 f"{disk / raw_bytes:.4f}x"],
                ["  of which the empty schema", fmt_bytes(empty_size), ""],
                ["storage_stats().attachment_bytes", fmt_bytes(stats.attachment_bytes),
                 f"{stats.attachment_bytes / raw_bytes:.4f}x"],
                ["  + message rows' stored JSON", fmt_bytes(row_text), ""],
                ["  = stored bytes", fmt_bytes(stored), f"{stored / raw_bytes:.4f}x"],
                ["storage_stats().attachments", f"{stats.attachments}", ""],
                ["storage_stats().content_bytes (row 'bytes' column)",
                 fmt_bytes(stats.content_bytes), f"{stats.content_bytes / raw_bytes:.4f}x"],
                ["message row content, largest", f"{largest:,} B", ""],
                ["message row content, mean", f"{mean:,.0f} B", ""],
                ["continuation rows", f"{chunk_rows}", ""],
            ],
        )
        same_stats = same.store.storage_stats()
        same_disk = same.raw.size_on_disk()
        report.table(
            f"{n} messages re-sending the same {args.image_kb} KiB image",
            ["measure", "value"],
            [["storage_stats().attachments", f"{same_stats.attachments}"],
             ["storage_stats().attachment_bytes",
              f"{same_stats.attachment_bytes:,} B ({fmt_bytes(same_stats.attachment_bytes)})"],
             [f"database size ({same.raw.size_what})", fmt_bytes(same_disk)],
             ["message rows", f"{same_stats.messages}"]],
        )
        base = {"api, distinct images": "raw SQL, distinct images",
                "api, same image": "raw SQL, distinct images",
                "api, no image": "raw SQL, no image"}
        rows = []
        for name in contenders:
            versus = f"{rate[name] / rate[base[name]]:.2f}x" if name in base else ""
            rows.append([name, f"{rate[name]:,.0f}", fmt_s(1 / rate[name]), versus])
        report.table(
            f"append throughput (median of {rounds} rounds of {args.round})",
            ["append", "appends/s", "per append", "vs raw SQL (speed)"],
            rows,
        )
        slowdown = rate["api, no image"] / rate["api, distinct images"]
        raw_slowdown = rate["raw SQL, no image"] / rate["raw SQL, distinct images"]
        print(f"an image makes an append {slowdown:.1f}x slower through the API "
              f"({raw_slowdown:.1f}x slower in raw SQL)\n")

        report.target(f"distinct images: database size < 1.05x raw ({fmt_bytes(raw_bytes)})",
                      disk / raw_bytes, 1.05 - 1e-9, f"{disk / raw_bytes:.4f}x")
        report.target("distinct images: stored bytes (attachments + rows) < 1.05x raw",
                      stored / raw_bytes, 1.05 - 1e-9, f"{stored / raw_bytes:.4f}x")
        report.target("message rows < 1 KB each", largest, 1023, f"largest {largest:,} B")
        report.check(
            "same image stored once",
            same_stats.attachments == 1 and same_stats.attachment_bytes == size,
            f"{same_stats.attachments} attachment(s), {same_stats.attachment_bytes:,} B",
        )
        return report.finish()


if __name__ == "__main__":
    sys.exit(main())
