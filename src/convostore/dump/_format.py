"""What a dump file holds: the format's name and version, its record types, and the counts.

The format is documented in ``docs/dump.md``; :mod:`convostore.dump` writes it and
:mod:`convostore.dump._restore` reads it. Both sides take their names from here.
"""

from __future__ import annotations

from dataclasses import dataclass

FORMAT = "convostore-dump"
"""The header's ``format``: what the first line of every dump says it is."""

VERSION = 2
"""The format version this convostore writes, and the newest it reads (version 1, whose
``directory`` records are the session manager's registry rows, is read too)."""

HEADER = "header"
ATTACHMENT = "attachment"
DIRECTORY = "directory"
MESSAGE = "message"
COMPACTION = "compaction"
END = "end"
RECORD_TYPES = (HEADER, ATTACHMENT, DIRECTORY, MESSAGE, COMPACTION, END)
"""Every record type, as the ``type`` field of a line names it."""

WINDOW_BYTES = 2 * 1024 * 1024
"""Most stored bytes of messages a dump reads, or a restore writes, at once."""

WINDOW_ROWS = 256
"""Most rows a dump sizes, or a restore writes in one transaction, at once."""


@dataclass(frozen=True)
class DumpCounts:
    """What a dump wrote, or a restore read (the ``end`` record carries the dump's own)."""

    sessions: int = 0
    """Sessions with messages or compaction records."""
    messages: int = 0
    compactions: int = 0
    attachments: int = 0
    """Payloads, each written once however many messages share it."""
    directory: int = 0
    """Rows of the session directory (internal sessions' included); a restore counts the rows
    it set (``present``: a row already as dumped, of a session it wrote no message into)."""
    present: int = 0
    """Restore only: records already in the store, left as they were (a resumed restore)."""
    unreadable: int = 0
    """Dump only: stored rows that could not be decoded, left out (a warning each)."""
