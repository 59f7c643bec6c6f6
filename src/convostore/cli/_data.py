"""The ``convostore`` commands that move data in bulk: ``dump``, ``restore``, ``migrate``,
``import`` and ``index``, each with a progress bar on a terminal (:mod:`convostore.cli._progress`).

Each is a short body over a public call: :func:`convostore.dump.dump`,
:func:`~convostore.dump.restore`, :func:`~convostore.dump.migrate`,
:meth:`Session.import_messages <convostore.Session.import_messages>` (in batches: a batch is
stored whole or not at all) and :meth:`Sessions.build_search_index
<convostore.Sessions.build_search_index>`. Registered by :mod:`convostore.cli`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

from .. import codec
from ..dump import dump, migrate, restore
from ..dump._format import WINDOW_BYTES, WINDOW_ROWS, DumpCounts
from ..errors import BadDump, ConvostoreError
from ..limits import MAX_TIMESTAMP_MS
from ..messages import _batch
from ..model import UNSET, ImportItem
from ..session import Session
from ._base import CliError, arg, open_store
from ._progress import Update, bar
from ._text import Output
from ._text import sid as _sid

IMPORT_BATCH = WINDOW_ROWS
"""Most lines ``import`` stores in one transaction (also at most 2 MiB of them)."""


def _problem(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.contextmanager
def _reading(path: str) -> Iterator[tuple[str, IO[str]]]:
    """The named file (``-``: stdin, never closed) as UTF-8 text, with its name for errors."""
    if path == "-":
        yield "stdin", sys.stdin
        return
    try:
        stream = open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc
    with stream:
        yield path, stream


def _tracked(stream: IO[str], update: Update) -> Iterator[str]:
    """The lines of ``stream``, reporting bytes read of its size (when it has one)."""
    raw: Any = getattr(stream, "buffer", None)
    try:
        total: int | None = os.fstat(stream.fileno()).st_size if raw is not None else None
    except (OSError, ValueError, AttributeError):
        total = None
    for number, line in enumerate(stream, 1):
        if number % 64 == 0 and raw is not None and raw.seekable():
            update(raw.tell(), total)
        yield line
    if total:
        update(total, total)


def _summary(counts: DumpCounts, verb: str) -> str:
    text = (f"{verb} {counts.messages:,} messages, {counts.compactions:,} compactions, "
            f"{counts.attachments:,} attachments and {counts.directory:,} directory rows of "
            f"{counts.sessions:,} sessions")
    if counts.present:
        text += f" ({counts.present:,} records were already there)"
    if counts.unreadable:
        text += f" ({counts.unreadable:,} unreadable messages left out)"
    return text


def cmd_dump(args: argparse.Namespace, out: Output) -> None:
    """``convostore dump DB [-o FILE]``."""
    with open_store(args.db) as store, bar("dump", "messages") as update:
        if args.output is None:
            counts = dump(store, out.stream, progress=update)
        else:
            with open(args.output, "w", encoding="utf-8", newline="\n") as f:
                counts = dump(store, f, progress=update)
    if args.output is not None:
        out.line(_summary(counts, "dumped") + f" to {args.output}")
    elif sys.stderr.isatty():
        print(_summary(counts, "dumped"), file=sys.stderr)


def cmd_restore(args: argparse.Namespace, out: Output) -> None:
    """``convostore restore DB FILE``."""
    with _reading(args.file) as (name, stream), open_store(args.db, create=True) as store, \
            bar("restore", "bytes") as update:
        try:
            counts = restore(store, _tracked(stream, update))
        except BadDump as exc:
            raise CliError(f"{name} {exc}") from exc
    out.line(_summary(counts, "restored"))


def cmd_migrate(args: argparse.Namespace, out: Output) -> None:
    """``convostore migrate SRC DST``."""
    with open_store(args.src) as src, open_store(args.dst, create=True) as dst, \
            bar("migrate", "messages") as update:
        counts = migrate(src, dst, progress=update)
    out.line(_summary(counts, "copied"))


def cmd_index(args: argparse.Namespace, out: Output) -> None:
    """``convostore index DB``."""
    with open_store(args.db) as store, bar("index", "messages") as update:
        done = store.build_search_index(update)
    out.line(f"search index complete ({done:,} messages indexed now)")


def _entry(name: str, number: int, line: str) -> ImportItem:
    """One line of an import as an :class:`ImportItem`, its shape checked."""
    try:
        entry = codec.loads(line)
    except ValueError as exc:  # codec.loads parses any depth: no RecursionError
        raise CliError(f"{name} line {number}: not valid JSON ({exc})") from exc
    if not isinstance(entry, dict) or not isinstance(entry.get("message"), dict):
        raise CliError(f'{name} line {number}: expected {{"parent_id": ..., '
                       f'"message": {{...}}}}')
    parent = entry.get("parent_id", UNSET)  # no key: the previous line's message
    created = entry.get("created_at")
    if parent is not None and parent is not UNSET and not isinstance(parent, str):
        raise CliError(f"{name} line {number}: parent_id must be a string or null")
    # JSON times are whole milliseconds: the CLI refuses a float or a boolean, which the
    # library would take; import_messages checks the range.
    if created is not None and (isinstance(created, bool) or not isinstance(created, int)):
        raise CliError(f"{name} line {number}: created_at must be epoch milliseconds "
                       f"from 0 to {MAX_TIMESTAMP_MS} (year 9999)")
    return ImportItem(entry["message"], parent, created)


def _store_batch(
    session: Session, name: str, batch: list[tuple[int, ImportItem]], previous: str | None
) -> tuple[int, int, str | None]:
    """Import one batch, all or nothing; (added, already there, the last message's id)."""
    try:
        results = session.import_messages([item for _n, item in batch], parent_id=previous)
    except (ConvostoreError, ValueError, OverflowError) as exc:
        located = _batch.located(exc)
        if located is None:
            raise CliError(f"{name}: {_problem(exc)}") from exc
        index, problem = located
        raise CliError(f"{name} line {batch[index][0]}: {_problem(problem)}") from exc
    added = sum(r.inserted for r in results)
    return added, len(results) - added, results[-1].message["id"]


def cmd_import(args: argparse.Namespace, out: Output) -> None:
    """``convostore import DB SESSION FILE``: batches of lines, each stored whole or not."""
    arg(args.session, "SESSION")
    added = present = 0
    with _reading(args.file) as (name, stream), open_store(args.db, create=True) as store, \
            bar("import", "bytes") as update:
        session = store.session(args.session)
        previous: str | None = None
        batch: list[tuple[int, ImportItem]] = []
        size = 0
        for number, line in enumerate(_tracked(stream, update), 1):
            if not line.strip():
                continue
            batch.append((number, _entry(name, number, line)))
            size += len(line)
            if len(batch) >= IMPORT_BATCH or size >= WINDOW_BYTES:
                new, old, previous = _store_batch(session, name, batch, previous)
                added, present, batch, size = added + new, present + old, [], 0
        if batch:
            new, old, previous = _store_batch(session, name, batch, previous)
            added, present = added + new, present + old
    out.line(f"imported {added} messages into session {_sid(args.session)}"
             + (f" ({present} were already there)" if present else ""))


_DUMP_FORMAT = """\
The dump is JSON Lines, UTF-8: a header, then each session's messages (in
write order, every branch, compacted originals too, with parent, time and token
estimate) and compaction records, each attachment payload once before the first
message that needs it, then every directory row (title, owner, metadata, times,
expiry, chosen branch), and an end record with the counts. The format is
versioned and documented in docs/dump.md."""


def register(command: Any, db: argparse.ArgumentParser) -> None:
    """Add ``dump``, ``restore`` and ``migrate`` to the parser, through ``cli.build_parser``'s
    ``command(name, run, summary, description, parents, epilog)``."""
    dumped = command(
        "dump", cmd_dump, "write the whole store as JSON Lines (a backup)",
        "Write everything the store holds to stdout (or --output): every session,\n"
        "branch, compaction record and timestamp, each attachment once, the session\n"
        "directory and context blocks. Streamed in bounded memory; a progress bar\n"
        "shows on stderr when it is a terminal.", [db], epilog=_DUMP_FORMAT)
    dumped.add_argument("-o", "--output", metavar="FILE",
                        help="write the dump to FILE (and a summary to stdout)")
    restored = command(
        "restore", cmd_restore, "read a dump into a store",
        "Read a dump written by `convostore dump` into DB (created if missing), exactly\n"
        "as it was dumped, a batch per transaction. Idempotent: what DB already holds\n"
        "is skipped, so an interrupted restore is finished by running it again. A\n"
        "truncated or corrupt dump stops at the broken line, naming it; nothing of that\n"
        "line is written. A dump from a newer format version is refused.", [db])
    restored.add_argument("file", metavar="FILE", help="the dump, or - for stdin")
    moved = command(
        "migrate", cmd_migrate, "copy a store to another database or engine",
        "Copy every session of SRC into DST (created if missing), with the fidelity of\n"
        "dump and restore and no file between them: SQLite to PostgreSQL and back.\n"
        "Resumable: run it again after an interruption; what DST holds is skipped.", [])
    moved.add_argument("src", metavar="SRC", help="the store to copy (" + _DB_HELP + ")")
    moved.add_argument("dst", metavar="DST", help="where to copy it")


_DB_HELP = "a path or a URL, as DB"
