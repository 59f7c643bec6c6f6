"""What every command of the ``convostore`` command line shares: its name, its error, opening
a store, checking ids given on the command line, finding a session.

The commands live in the modules :mod:`convostore.cli` registers (``_read``, ``_demo``,
``_life``, ``_data``, ``_serve``); they import these from here, never from the package, so the
package imports its commands and no command imports the package.
"""

from __future__ import annotations

from ..backends._engines import display_url, has_store
from ..session import Session
from ..store import Sessions
from ._text import sid as _sid

PROG = "convostore"
"""The command's name, in its help, its errors and the commands it suggests."""


class CliError(Exception):
    """A failure reported as one ``convostore: error: ...`` line and exit code 1."""


def open_store(url: str, *, create: bool = False) -> Sessions:
    """Open a store; without ``create`` (the read-only commands), a database that holds no
    store is an error and is left as it was: no file created, no table created."""
    if not create and not has_store(url):
        raise CliError(f"no convostore data at {display_url(url)}")
    return Sessions.open(url)


def arg(value: str, name: str) -> str:
    """An id given on the command line; one that is not valid UTF-8 (read from the command
    line as lone surrogates) can name nothing stored, and is refused naming ``name``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CliError(f"{name} is not valid UTF-8: {value}") from None  # main escapes it
    return value


def find_session(store: Sessions, url: str, session_id: str | None) -> tuple[Session, int]:
    """The handle of an existing session and its message count.

    :param session_id: None → the default session ``""``, or the only session of the database.
    """
    counts = {s.session_id: s.messages for s in store.list_sessions()}
    if session_id is None:
        if not counts:
            raise CliError(f"no sessions in {display_url(url)}")
        session_id = "" if "" in counts or len(counts) > 1 else next(iter(counts))
    if session_id not in counts:
        raise CliError(f"no session {_sid(session_id)} in {display_url(url)}")
    return store.session(session_id), counts[session_id]


def check_leaf(session: Session, leaf_id: str | None) -> None:
    """Refuse a ``--leaf`` that names no message of the session."""
    if leaf_id is not None and session.get_message(arg(leaf_id, "--leaf")) is None:
        raise CliError(f"no message {leaf_id!r} in session {_sid(session.session_id)}")
