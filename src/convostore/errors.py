"""The exceptions convostore raises.

Every error derives from :class:`ConvostoreError`, so one ``except`` catches them all::

    ConvostoreError
    ├── InvalidMessage(ValueError)       a value JSON can't hold, a bad shape; .field names it
    ├── InvalidMessageType(TypeError)    id/role not str, parts not a list; .field names it
    ├── InvalidArgument(ValueError)      an argument outside the store's limits; .argument
    ├── InvalidArgumentType(TypeError)   an argument of the wrong type; .argument names it
    ├── InvalidURL(ValueError)           Sessions.open can't tell which backend to use
    ├── MissingDependency(ImportError)   a postgres URL without the [postgres] extra
    ├── StoreClosed                      a store or handle used after close()
    ├── SchemaTooNew                     a database written by a newer convostore
    ├── NoCompactionFunction             compact() before on_compaction()
    ├── UnreadableMessage                a stored row that cannot be decoded; names the message
    ├── CursorExpired                    a change-log cursor older than what the log keeps
    ├── BadDump(ValueError)              a dump that is truncated or corrupt; .line names where
    ├── DumpTooNew                       a dump written in a newer format than this one reads
    └── BackendError                     an engine failure; the driver's exception is __cause__

Validation happens before any transaction opens, so a rejected write leaves nothing behind.
Every class keeps its constructor arguments in ``args``, so errors pickle across processes.
"""

from __future__ import annotations


class ConvostoreError(Exception):
    """Base class of every error convostore raises."""


class InvalidMessage(ConvostoreError, ValueError):
    """A message was rejected before anything was written: a value JSON cannot hold, or a bad shape.

    ``field`` is a path into the message such as ``parts[0].text``.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem)
        self.field = field
        self.problem = problem

    def __str__(self) -> str:
        return f"message field {self.field!r}: {self.problem}"


class InvalidMessageType(ConvostoreError, TypeError):
    """A message (or one of its required fields) has the wrong type; nothing was written."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem)
        self.field = field
        self.problem = problem

    def __str__(self) -> str:
        return f"message field {self.field!r}: {self.problem}"


class _ArgumentError(ConvostoreError):
    """What both argument errors share, built as ``InvalidArgument(argument, problem)``."""

    args: tuple[str, str]

    @property
    def argument(self) -> str:
        """The argument's name (``leaf_id``, ``ids[2]``...)."""
        return self.args[0]

    @property
    def problem(self) -> str:
        """What is wrong with it (``must not contain a NUL character``)."""
        return self.args[1]

    def __str__(self) -> str:
        return " ".join(self.args)


class InvalidArgument(_ArgumentError, ValueError):
    """An argument is outside the store's limits (an id with a NUL, a timestamp past year
    9999...); nothing was written. ``argument`` names it, as in ``ids[2]``."""


class InvalidArgumentType(_ArgumentError, TypeError):
    """An argument has the wrong type; nothing was written. ``argument`` names it."""


class InvalidURL(ConvostoreError, ValueError):
    """:meth:`Sessions.open` was given a URL or path it cannot open."""


class MissingDependency(ConvostoreError, ImportError):
    """An optional dependency is needed; the message says which extra to install."""


class StoreClosed(ConvostoreError):
    """A store, or a session handle of it, was used after ``close()``."""


class SchemaTooNew(ConvostoreError):
    """The database was written by a newer convostore whose schema this version cannot read."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(found, supported)
        self.found = found
        self.supported = supported

    def __str__(self) -> str:
        return (
            f"database schema version {self.found} is newer than this convostore supports "
            f"({self.supported}); upgrade convostore to open it"
        )


class NoCompactionFunction(ConvostoreError):
    """:meth:`Session.compact` was called before a function was registered."""

    def __init__(self, message: str = "No compaction function registered. "
                 "Call on_compaction() first.") -> None:
        super().__init__(message)


class UnreadableMessage(ConvostoreError):
    """A stored row cannot be decoded into a message (damaged outside convostore).

    Raised by reads of that one message (:meth:`Session.get_message`,
    :meth:`Session.get_latest_leaf`); reads of many messages leave the row out, log a warning
    on the ``convostore`` logger and go on with the others.
    """

    def __init__(self, session_id: str, message_id: str, problem: str) -> None:
        super().__init__(session_id, message_id, problem)
        self.session_id, self.message_id, self.problem = session_id, message_id, problem

    def __str__(self) -> str:
        sid, mid = self.session_id, self.message_id
        return f"message {mid!r} of session {sid!r} cannot be read: {self.problem}"


class CursorExpired(ConvostoreError):
    """A change-log cursor is older than the log: changes after it were trimmed away.

    Raised by :meth:`Sessions.changes` and :meth:`Sessions.watch`. The client cannot catch up
    from the log: it should take a new cursor (:meth:`Sessions.change_cursor`), read the state
    it shows afresh, then watch from that cursor. ``cursor`` is the one given, ``horizon`` the
    highest position trimmed (a cursor at or above it is valid).
    """

    def __init__(self, cursor: int, horizon: int) -> None:
        super().__init__(cursor, horizon)
        self.cursor, self.horizon = cursor, horizon

    def __str__(self) -> str:
        return (
            f"change cursor {self.cursor} is older than the change log, which was trimmed up "
            f"to {self.horizon}: changes after the cursor are gone; resync from "
            "store.change_cursor() and read the state afresh"
        )


class BackendError(ConvostoreError):
    """The storage engine failed; the driver's exception is ``__cause__``."""


class BadDump(ConvostoreError, ValueError):
    """A dump being restored is truncated or corrupt (:mod:`convostore.dump`).

    ``line`` is the line number (from 1) of the first broken record; nothing of that record
    was written.
    """

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(line, problem)
        self.line, self.problem = line, problem

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}"


class DumpTooNew(ConvostoreError):
    """A dump was written in a newer format version than this convostore reads; nothing was
    restored."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(found, supported)
        self.found, self.supported = found, supported

    def __str__(self) -> str:
        return (f"dump format version {self.found} is newer than this convostore reads "
                f"({self.supported}); upgrade convostore to restore it")
