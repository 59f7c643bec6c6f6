"""The session manager's records and errors: a registry row (:class:`SessionInfo`) and the
two lookups that fail (:class:`UnknownSession`, :class:`UnknownMessage`). Published by
:mod:`convostore.manager`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConvostoreError


class UnknownSession(ConvostoreError, KeyError):
    """A session id has no row in the manager's registry (nothing was written)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id

    def __str__(self) -> str:
        return f"no session {self.session_id!r} in the registry"


class UnknownMessage(ConvostoreError, KeyError):
    """A message id named by :meth:`SessionManager.fork` is not in the session."""

    def __init__(self, session_id: str, message_id: str) -> None:
        super().__init__(session_id, message_id)
        self.session_id = session_id
        self.message_id = message_id

    def __str__(self) -> str:
        return f"no message {self.message_id!r} in session {self.session_id!r}"


@dataclass(frozen=True)
class SessionInfo:
    """One registry row: a managed session's name, lineage, usage and times (a
    :class:`~convostore.SessionSummary` is what the store knows from messages alone)."""

    id: str
    name: str
    parent_session_id: str | None
    """The session it was forked or split from, if any."""
    model: str | None
    source: str | None
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    end_reason: str | None
    """``"compaction"`` once :meth:`SessionManager.compact_and_split` continued it elsewhere."""
    created_at: int
    """Epoch milliseconds."""
    updated_at: int
    """Epoch milliseconds of the last registry write or message write through the manager."""


def info_of(row: Sequence[Any]) -> SessionInfo:
    return SessionInfo(
        id=row[0], name=row[1], parent_session_id=row[2], model=row[3], source=row[4],
        input_tokens=int(row[5]), output_tokens=int(row[6]), estimated_cost=float(row[7]),
        end_reason=row[8], created_at=int(row[9]), updated_at=int(row[10]),
    )
