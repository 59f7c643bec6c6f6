"""``Context`` and ``AsyncContext``: the two faces over one behaviour (``_core.py``).

Both share configuration (the builder methods, which do no I/O); each I/O method is one line that
drives the same core generator, synchronously or on the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ._blocks import ContextBlock, ContextBlockConfig
from ._core import ContextCore
from ._ops import Gen, arun, run
from ._tools import ToolDefinition

if TYPE_CHECKING:
    from ..aio import AsyncSession
    from ..session import Session

_C = TypeVar("_C", bound="_ContextBase")
T = TypeVar("T")


class _ContextBase:
    """Configuration shared by :class:`Context` and :class:`AsyncContext`."""

    _asynchronous = False

    def __init__(
        self,
        session: Any,
        blocks: Iterable[ContextBlockConfig] = (),
        *,
        prompt_cache: Any = None,
        token_counter: Callable[[str], int] | None = None,
        store: Any = None,
    ) -> None:
        self._core = ContextCore(
            session,
            list(blocks),
            prompt_cache=prompt_cache,
            token_counter=token_counter,
            store=store,
            asynchronous=self._asynchronous,
        )

    def __repr__(self) -> str:
        labels = ", ".join(self._core.configs)
        return f"<{type(self).__name__} session={self._core.session_id!r} blocks=[{labels}]>"

    @property
    def session(self) -> Any:
        """The session handle this context serves."""
        return self._core.session

    def with_context(
        self: _C,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
    ) -> _C:
        """Add a block before first use; returns the context (chainable).

        :param label: the block's name (unique in this context).
        :param description: shown in the prompt header and the ``set_context`` description.
        :param max_tokens: limit on whole-block writes; the header then shows the usage.
        :param provider: the content's source (see :mod:`convostore.context`); ``None`` gives a
            writable block kept in the store under the key ``label`` (``label_<session id>`` for
            a named session).
        :raises ContextError: ``Block "<label>" already exists``.
        """
        self._core.add_config(ContextBlockConfig(label, description, max_tokens, provider))
        return self

    def with_cached_prompt(self: _C, provider: Any = None) -> _C:
        """Persist the frozen system prompt so it survives a restart of the process; chainable.

        :param provider: an object with ``get()`` and ``set(content)``; ``None`` keeps it in the
            store under the key ``_system_prompt`` (``_system_prompt_<session id>``).
        """
        self._core.set_prompt_cache(provider)
        return self

    def on_skill_unload(self: _C, callback: Callable[[str, str], object] | None) -> _C:
        """Call ``callback(label, key)`` after each skill unload (it may be async); chainable.

        The callback runs while the context is busy: it must not call the context.
        """
        if callback is not None and not callable(callback):
            raise TypeError(f"on_skill_unload() needs a callable, not {type(callback).__name__}")
        self._core.on_unload = callback
        return self

    def remove_context(self, label: str) -> bool:
        """Forget a block and its loaded skills; the history and the frozen prompt are unchanged.

        :returns: False when there was no such block.
        """
        return self._core.remove(label)

    def clear_skill_state(self) -> None:
        """Forget which skills are loaded (the history is not rewritten)."""
        self._core.loaded.clear()


class Context(_ContextBase):
    """The prompt side of one conversation: context blocks, the frozen system prompt, memory tools.

    :param session: a :class:`~convostore.Session` handle.
    :param blocks: the blocks, in prompt order (or add them with :meth:`with_context`).
    :param prompt_cache: ``True`` for the store-backed prompt cache, or a provider with
        ``get()``/``set()``; see :meth:`with_cached_prompt`.
    :param token_counter: counts a string's tokens; default: the store's, else the heuristic.
    :param store: where store-backed providers keep their data; default: the session's store.

    Nothing is read until first use: then every block's provider is initialised and read, and
    if any block holds skills, the skills loaded in the history are restored (one streamed read
    of the history as the model sees it: a load inside a compacted span no longer counts).
    Methods are safe to call from several threads.

    ::

        context = (
            Context(store.session("chat"))
            .with_context("soul", provider=Identity())
            .with_context("memory", description="Learned facts", max_tokens=1100)
            .with_cached_prompt()
        )
        system = context.freeze_system_prompt()
        tools = to_openai_tools(context.tools())
        reply = context.execute(call.name, call.arguments)
    """

    def __init__(
        self,
        session: Session,
        blocks: Iterable[ContextBlockConfig] = (),
        *,
        prompt_cache: Any = None,
        token_counter: Callable[[str], int] | None = None,
        store: Any = None,
    ) -> None:
        super().__init__(
            session, blocks, prompt_cache=prompt_cache, token_counter=token_counter, store=store
        )
        self._lock = threading.RLock()

    def _run(self, gen: Gen[T]) -> T:
        with self._lock:
            return run(gen)

    def freeze_system_prompt(self) -> str:
        """The frozen system prompt: the cached one if the cache holds a value (an empty string
        counts), else rendered from the blocks now, kept, and written to the cache.

        Later block writes do not change it (the model's prefix cache stays valid) until
        :meth:`refresh_system_prompt`.
        """
        return self._run(self._core.freeze())

    def refresh_system_prompt(self) -> str:
        """Re-read every provider, render a new prompt, keep it and write it to the cache."""
        return self._run(self._core.refresh())

    def get_system_prompt(self) -> str:
        """The prompt kept in memory; on first call, the same as :meth:`freeze_system_prompt`."""
        return self._run(self._core.system_prompt())

    def get_context_block(self, label: str) -> ContextBlock | None:
        """The block ``label`` as last loaded or written, or None."""
        return self._run(self._core.get_block(label))

    def get_context_blocks(self) -> list[ContextBlock]:
        """Every block, in prompt order."""
        return self._run(self._core.get_blocks())

    def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Write a block's whole content to its provider now (the frozen prompt is unchanged).

        :raises ContextError: ``Block "<label>" is readonly`` (also for an unknown label),
            ``... is a keyed provider ...`` for skill and search blocks,
            ``Block "<label>" exceeds maxTokens: <tokens> > <max>``.
        """
        return self._run(self._core.replace_block(label, content))

    def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Add ``content`` to a block (on a new line unless it starts with one).

        :raises ContextError: ``Block "<label>" not found``, then as :meth:`replace_context_block`
            (``max_tokens`` applies to the combined text).
        """
        return self._run(self._core.append_block(label, content))

    def add_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
    ) -> ContextBlock:
        """Add and load a block at run time (the frozen prompt is unchanged until refreshed).

        The first skill block added this way triggers the restore of loaded skills.

        :raises ContextError: ``Block "<label>" already exists``.
        """
        config = ContextBlockConfig(label, description, max_tokens, provider)
        return self._run(self._core.add_block(config))

    def set_skill(
        self, label: str, key: str, content: str, description: str | None = None
    ) -> None:
        """Write the document ``key`` of a skill block through its provider's ``set``."""
        self._run(self._core.set_skill(label, key, content, description))

    def set_search_entry(self, label: str, key: str, content: str) -> None:
        """Add or replace the entry ``key`` of a searchable block."""
        self._run(self._core.set_search_entry(label, key, content))

    def load_skill(self, label: str, key: str) -> str | None:
        """A skill document, marked loaded when found; None when the provider has none."""
        return self._run(self._core.load_skill(label, key))

    def unload_skill(self, label: str, key: str) -> bool:
        """Mark a skill unloaded and replace its text in the history by a short marker.

        The newest assistant message holding its ``load_context`` output is rewritten with
        ``update_message`` (found by a newest-first streamed read).

        :returns: False (and nothing changed) when the skill was not loaded.
        """
        return self._run(self._core.unload_skill(label, key))

    def get_loaded_skill_keys(self) -> set[str]:
        """The loaded skills, as ``"label:key"`` strings."""
        return self._run(self._core.loaded_skills())

    def search_context(self, label: str, query: str) -> str | None:
        """Search a searchable block: its provider's rendered hits, or None."""
        return self._run(self._core.search(label, query))

    def tools(self) -> list[ToolDefinition]:
        """The memory tools the blocks call for (see :func:`to_openai_tools`)."""
        return self._run(self._core.tools())

    def execute(self, name: str, arguments: object = None) -> str:
        """Run a tool call; never raises to the model (a failure is an ``Error: ...`` string).

        :param name: ``set_context``, ``load_context``, ``unload_context`` or ``search_context``.
        :param arguments: a dict, or the JSON text of one.
        """
        return self._run(self._core.execute(name, arguments))

    def token_estimate(self) -> int:
        """The session's token estimate plus the system prompt's (§6.4, v0.17).

        The prompt counted is the frozen one in memory, else the cached one, else one rendered
        now without freezing or caching it.
        """
        return self._run(self._core.token_estimate())

    def compact_after(self, threshold: int | None) -> Context:
        """Auto-compact the session when its estimate plus the system prompt's exceeds
        ``threshold``; ``None`` turns it off. Needs ``session.on_compaction(fn)``; chainable.

        Registers with ``session.compact_after(threshold, extra_tokens=...)``: after each
        inserted append the session adds the prompt's tokens as this context last saw it.
        """
        self._run(self._core.compact_after(threshold))
        return self


class AsyncContext(_ContextBase):
    """Async twin of :class:`Context`, over an :class:`~convostore.AsyncSession`.

    Its I/O methods are coroutines with the same names and behaviour; builder methods
    (:meth:`with_context`, :meth:`with_cached_prompt`, ...) stay plain calls.
    """

    _asynchronous = True

    def __init__(
        self,
        session: AsyncSession,
        blocks: Iterable[ContextBlockConfig] = (),
        *,
        prompt_cache: Any = None,
        token_counter: Callable[[str], int] | None = None,
        store: Any = None,
    ) -> None:
        super().__init__(
            session, blocks, prompt_cache=prompt_cache, token_counter=token_counter, store=store
        )
        self._lock = asyncio.Lock()

    async def _run(self, gen: Gen[T]) -> T:
        async with self._lock:
            return await arun(gen)

    async def freeze_system_prompt(self) -> str:
        """Async twin of :meth:`Context.freeze_system_prompt`."""
        return await self._run(self._core.freeze())

    async def refresh_system_prompt(self) -> str:
        """Async twin of :meth:`Context.refresh_system_prompt`."""
        return await self._run(self._core.refresh())

    async def get_system_prompt(self) -> str:
        """Async twin of :meth:`Context.get_system_prompt`."""
        return await self._run(self._core.system_prompt())

    async def get_context_block(self, label: str) -> ContextBlock | None:
        """Async twin of :meth:`Context.get_context_block`."""
        return await self._run(self._core.get_block(label))

    async def get_context_blocks(self) -> list[ContextBlock]:
        """Async twin of :meth:`Context.get_context_blocks`."""
        return await self._run(self._core.get_blocks())

    async def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Async twin of :meth:`Context.replace_context_block`."""
        return await self._run(self._core.replace_block(label, content))

    async def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Async twin of :meth:`Context.append_context_block`."""
        return await self._run(self._core.append_block(label, content))

    async def add_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
    ) -> ContextBlock:
        """Async twin of :meth:`Context.add_context`."""
        config = ContextBlockConfig(label, description, max_tokens, provider)
        return await self._run(self._core.add_block(config))

    async def set_skill(
        self, label: str, key: str, content: str, description: str | None = None
    ) -> None:
        """Async twin of :meth:`Context.set_skill`."""
        await self._run(self._core.set_skill(label, key, content, description))

    async def set_search_entry(self, label: str, key: str, content: str) -> None:
        """Async twin of :meth:`Context.set_search_entry`."""
        await self._run(self._core.set_search_entry(label, key, content))

    async def load_skill(self, label: str, key: str) -> str | None:
        """Async twin of :meth:`Context.load_skill`."""
        return await self._run(self._core.load_skill(label, key))

    async def unload_skill(self, label: str, key: str) -> bool:
        """Async twin of :meth:`Context.unload_skill`."""
        return await self._run(self._core.unload_skill(label, key))

    async def get_loaded_skill_keys(self) -> set[str]:
        """Async twin of :meth:`Context.get_loaded_skill_keys`."""
        return await self._run(self._core.loaded_skills())

    async def search_context(self, label: str, query: str) -> str | None:
        """Async twin of :meth:`Context.search_context`."""
        return await self._run(self._core.search(label, query))

    async def tools(self) -> list[ToolDefinition]:
        """Async twin of :meth:`Context.tools`."""
        return await self._run(self._core.tools())

    async def execute(self, name: str, arguments: object = None) -> str:
        """Async twin of :meth:`Context.execute`."""
        return await self._run(self._core.execute(name, arguments))

    async def token_estimate(self) -> int:
        """Async twin of :meth:`Context.token_estimate`."""
        return await self._run(self._core.token_estimate())

    async def compact_after(self, threshold: int | None) -> AsyncContext:
        """Async twin of :meth:`Context.compact_after`."""
        await self._run(self._core.compact_after(threshold))
        return self
