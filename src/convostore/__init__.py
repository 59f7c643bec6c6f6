"""convostore: durable conversation storage for LLM agents.

Every message of every conversation kept as a tree, losslessly, in SQLite or PostgreSQL; history
read in bounded memory; old turns compacted into summaries without deleting them; full-text
search; media stored once, out of line; a change feed.

    from convostore import Sessions

    with Sessions.open("chat.db") as store:
        session = store.session()
        session.append_message({"id": "m1", "role": "user",
                                "parts": [{"type": "text", "text": "hi"}]})
        for message in session.history():
            ...
"""

from __future__ import annotations

from .aio import AsyncSession, AsyncSessions
from .compaction import COMPACTION_PREFIX, create_compact_function, is_compaction_message
from .directory._life import Duration, Moment
from .directory._records import (
    MessageRecord,
    PruneResult,
    SessionEntry,
    SessionPage,
    SiblingPosition,
)
from .errors import (
    BackendError,
    BadDump,
    ConvostoreError,
    CursorExpired,
    DumpTooNew,
    InvalidArgument,
    InvalidArgumentType,
    InvalidMessage,
    InvalidMessageType,
    InvalidURL,
    MissingDependency,
    NoCompactionFunction,
    SchemaTooNew,
    StoreClosed,
    UnreadableMessage,
)
from .model import (
    UNSET,
    AppendResult,
    Change,
    ChangeEvent,
    CompactResult,
    ImportItem,
    Message,
    RecentHistory,
    RowStat,
    SearchResult,
    SessionSummary,
    StorageStats,
    StoredCompaction,
)
from .session import Session
from .store import Sessions

__version__ = "0.1.0"

__all__ = [
    "AppendResult",
    "AsyncSession",
    "AsyncSessions",
    "BackendError",
    "BadDump",
    "COMPACTION_PREFIX",
    "Change",
    "ChangeEvent",
    "CompactResult",
    "ConvostoreError",
    "CursorExpired",
    "DumpTooNew",
    "Duration",
    "ImportItem",
    "InvalidArgument",
    "InvalidArgumentType",
    "InvalidMessage",
    "InvalidMessageType",
    "InvalidURL",
    "Message",
    "MessageRecord",
    "MissingDependency",
    "Moment",
    "NoCompactionFunction",
    "PruneResult",
    "RecentHistory",
    "RowStat",
    "SchemaTooNew",
    "SearchResult",
    "Session",
    "SessionEntry",
    "SessionPage",
    "SessionSummary",
    "Sessions",
    "SiblingPosition",
    "StorageStats",
    "StoreClosed",
    "StoredCompaction",
    "UNSET",
    "UnreadableMessage",
    "create_compact_function",
    "is_compaction_message",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = "convostore"
del _name, _obj
