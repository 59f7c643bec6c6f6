"""Drop-in stores for agent frameworks, each behind its own optional extra.

=================================  ==========================  ===============================
module                             framework                   install
=================================  ==========================  ===============================
``integrations.openai_agents``     OpenAI Agents SDK           ``convostore[openai-agents]``
``integrations.langchain``         LangChain (core)            ``convostore[langchain]``
``integrations.pydantic_ai``       pydantic-ai                 ``convostore[pydantic-ai]``
``integrations.langgraph``         LangGraph (checkpointer)    ``convostore[langgraph]``
=================================  ==========================  ===============================

Importing :mod:`convostore` never imports a framework; importing one of these modules without
its framework raises :class:`~convostore.MissingDependency` naming the extra to install.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import MissingDependency
from ..store import Sessions

if TYPE_CHECKING:
    from ..aio import AsyncSession, AsyncSessions
    from ..session import Session

T = TypeVar("T")


def missing(framework: str, extra: str, exc: ImportError) -> MissingDependency:
    """The error raised when an integration's framework is not installed.

    :param framework: the framework's name, for the message.
    :param extra: the convostore extra that installs it.
    :param exc: the original import error (kept as ``__cause__`` by the caller).
    """
    return MissingDependency(
        f"convostore's {framework} integration needs {framework}: "
        f"pip install 'convostore[{extra}]' ({exc})"
    )


class _Binding:
    """One convostore session as an integration uses it: a sync handle plus a way to run it.

    ``store`` may be a URL or path (opened here, closed by :meth:`close`), an open
    :class:`~convostore.Sessions`, or an open :class:`~convostore.aio.AsyncSessions` (calls then
    run on its worker threads). Work always runs as sync code over the sync handle, so an
    integration is written once.
    """

    def __init__(self, store: Any, session_id: str, open_options: dict[str, Any]) -> None:
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a string, not {type(session_id).__name__}")
        self.owned: Sessions | None = None
        self.async_store: AsyncSessions | None = None
        self.public: Session | AsyncSession
        if isinstance(store, (str, os.PathLike)):
            self.owned = Sessions.open(store, **open_options)
            self.handle: Session = self.owned.session(session_id)
            self.public = self.handle
            return
        if open_options:
            raise TypeError("open options apply only when the store is given as a URL")
        if isinstance(store, Sessions):
            self.handle = store.session(session_id)
            self.public = self.handle
            return
        from ..aio import AsyncSessions

        if not isinstance(store, AsyncSessions):
            raise TypeError(
                "store must be a URL, a path, a Sessions or an AsyncSessions, "
                f"not {type(store).__name__}"
            )
        self.async_store = store
        async_handle = store.session(session_id)
        self.handle = async_handle.sync
        self.public = async_handle

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` off the event loop and await its result."""
        if self.async_store is not None:
            return await self.async_store.run_sync(fn, *args)
        return await asyncio.to_thread(fn, *args)

    def close(self) -> None:
        """Close the store if it was opened here (from a URL or path)."""
        if self.owned is not None:
            self.owned.close()
