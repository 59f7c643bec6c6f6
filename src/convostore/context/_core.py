"""The behaviour of a context, written once as op generators (see ``_ops.py``).

:class:`ContextCore` holds the state a context keeps in memory -- the loaded blocks, the frozen
prompt snapshot, the loaded skills -- and every operation on them as a generator. ``Context``
and ``AsyncContext`` only drive these generators. The skills a history records are folded in
``_skill_history.py``; a model's tool calls are run by ``_execute.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..tokens import estimate_string_tokens
from ._blocks import ContextBlock, ContextBlockConfig, ContextError, render_system_prompt
from ._execute import execute
from ._ops import Call, Gen, Scan
from ._providers import is_searchable, is_skill, is_writable
from ._skill_history import fold_skill_events, unloaded_copy
from ._store_providers import AsyncStoreContextProvider, StoreContextProvider
from ._tools import ToolDefinition, build_tools

PROMPT_KEY = "_system_prompt"
"""Key of the default prompt cache (``_system_prompt_<session id>`` for a named session)."""

def scoped_key(name: str, session_id: str) -> str:
    """``name`` for the default session, ``name_<session id>`` otherwise (the reference's keys)."""
    return f"{name}_{session_id}" if session_id else name


def store_of(session: Any) -> Any:
    """The store a session handle belongs to, or None if it does not say."""
    store = getattr(session, "store", None)
    if store is not None and callable(getattr(store, "session", None)):
        return store
    return None


@dataclass
class _Block:
    config: ContextBlockConfig
    provider: Any
    content: str = ""
    tokens: int = 0

    @property
    def label(self) -> str:
        return self.config.label

    @property
    def keyed(self) -> bool:
        return is_skill(self.provider) or is_searchable(self.provider)

    def view(self) -> ContextBlock:
        return ContextBlock(
            label=self.config.label,
            description=self.config.description,
            content=self.content,
            tokens=self.tokens,
            max_tokens=self.config.max_tokens,
            writable=is_writable(self.provider),
            is_skill=is_skill(self.provider),
            is_searchable=is_searchable(self.provider),
        )



def _text(value: object, label: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(
            f"the provider of block {label!r} returned {type(value).__name__}, not a string"
        )
    return value


class ContextCore:
    """State and behaviour shared by both faces; every I/O method is an op generator."""

    def __init__(
        self,
        session: Any,
        configs: list[ContextBlockConfig],
        *,
        prompt_cache: Any,
        token_counter: Callable[[str], int] | None,
        store: Any,
        asynchronous: bool,
    ) -> None:
        session_id = getattr(session, "session_id", None)
        if not isinstance(session_id, str):
            raise TypeError(
                "Context needs a convostore session handle (store.session(id)), not "
                f"{type(session).__name__}"
            )
        self.session = session
        self.session_id: str = session_id
        self.store = store if store is not None else store_of(session)
        self.asynchronous = asynchronous
        self.configs: dict[str, ContextBlockConfig] = {}
        self.ready = False
        for config in configs:
            self.add_config(config)
        self.prompt_cache: Any = prompt_cache
        counter = token_counter or getattr(self.store, "token_counter", None)
        self.count: Callable[[str], int] = counter or estimate_string_tokens
        self.blocks: dict[str, _Block] = {}
        self.restored = False
        self.snapshot: str | None = None
        self.stored_prompt: str | None = None
        self.loaded: dict[str, None] = {}
        self.on_unload: Callable[[str, str], object] | None = None
        self._cache: Any = None
        self._cache_resolved = False

    # --- configuration (no I/O) -------------------------------------------------------------

    def add_config(self, config: ContextBlockConfig) -> None:
        if self.ready:
            raise RuntimeError(
                "the context is already loaded; add blocks with add_context() instead"
            )
        if config.label in self.configs:
            raise ContextError(f'Block "{config.label}" already exists', config.label)
        self.configs[config.label] = config

    def set_prompt_cache(self, provider: Any) -> None:
        if self._cache_resolved:
            raise RuntimeError("the prompt cache is already in use; set it before first use")
        self.prompt_cache = True if provider is None else provider

    def remove(self, label: str) -> bool:
        removed = self.configs.pop(label, None) is not None
        if label in self.blocks:
            self.blocks = {k: v for k, v in self.blocks.items() if k != label}
            removed = True
        prefix = f"{label}:"
        for item in [i for i in self.loaded if i.startswith(prefix)]:
            del self.loaded[item]
        return removed

    def _store_provider(self, key: str) -> Any:
        if self.store is None:
            raise TypeError(
                f"key {key!r} needs the store, but this session does not expose it: pass "
                "store=, or give every block (and the prompt cache) its own provider"
            )
        cls = AsyncStoreContextProvider if self.asynchronous else StoreContextProvider
        return cls(self.store, key, belongs_to=self.session_id)

    def _block(self, config: ContextBlockConfig) -> _Block:
        provider = config.provider
        if provider is None:
            provider = self._store_provider(scoped_key(config.label, self.session_id))
        elif not callable(getattr(provider, "get", None)):
            raise TypeError(f"the provider of block {config.label!r} has no get() method")
        return _Block(config, provider)

    def cache(self) -> Any:
        """The prompt cache provider (resolved on first use), or None."""
        if not self._cache_resolved:
            cache = self.prompt_cache
            if cache is True:
                cache = self._store_provider(scoped_key(PROMPT_KEY, self.session_id))
            elif cache is not None and not (
                callable(getattr(cache, "get", None)) and callable(getattr(cache, "set", None))
            ):
                raise TypeError(
                    f"a prompt cache needs get() and set() methods; {type(cache).__name__} "
                    "lacks one"
                )
            self._cache = None if cache is None or cache is False else cache
            self._cache_resolved = True
        return self._cache

    def views(self) -> list[ContextBlock]:
        """The loaded blocks as the prompt and the tools see them, in prompt order."""
        # ``blocks`` is replaced, never changed in place, so the auto-compaction hook can read
        # it from a writer's thread while this context adds or removes a block.
        return [b.view() for b in list(self.blocks.values())]

    def render(self) -> str:
        """The prompt rendered from the loaded blocks now (nothing kept or cached)."""
        return render_system_prompt(self.views())

    def prompt_tokens_now(self) -> int:
        """Tokens of the prompt as last seen, without I/O (the auto-compaction hook)."""
        if self.snapshot is not None:
            prompt = self.snapshot
        elif self.stored_prompt is not None:
            prompt = self.stored_prompt
        elif self.ready:
            prompt = self.render()
        else:
            prompt = ""
        return self.count(prompt) if prompt else 0

    # --- loading ----------------------------------------------------------------------------

    def _load(self, block: _Block) -> Gen[None]:
        init = getattr(block.provider, "init", None)
        if callable(init):
            yield Call(init, (block.label,))
        yield from self._reget(block)

    def _reget(self, block: _Block) -> Gen[None]:
        content = _text((yield Call(block.provider.get)), block.label)
        block.content = content
        block.tokens = self.count(content)

    def ensure_ready(self) -> Gen[None]:
        """Load every block on first use, then restore the loaded skills once if needed."""
        if not self.ready:
            blocks = {label: self._block(c) for label, c in self.configs.items()}
            for block in blocks.values():
                yield from self._load(block)
            self.blocks = blocks
            self.ready = True
        if not self.restored and any(is_skill(b.provider) for b in self.blocks.values()):
            yield from self._restore()

    def _restore(self) -> Gen[None]:
        loaded: dict[str, None] = {}

        def consume(message: Any) -> bool:
            fold_skill_events(message, loaded)
            return False

        yield Scan(self.session.history, consume)
        loaded.update(self.loaded)
        self.loaded = loaded
        self.restored = True

    def reload(self) -> Gen[None]:
        """Re-run ``init`` and ``get`` on every block's provider (the first load if none yet)."""
        if not self.ready:
            yield from self.ensure_ready()
            return
        for block in self.blocks.values():
            yield from self._load(block)

    def _read_cache(self) -> Gen[str | None]:
        cache = self.cache()
        if cache is None:
            return None
        value = yield Call(cache.get)
        stored = None if value is None else _text(value, "system prompt cache")
        self.stored_prompt = stored
        return stored

    def _write_cache(self, prompt: str) -> Gen[None]:
        cache = self.cache()
        if cache is not None:
            yield Call(cache.set, (prompt,))
            self.stored_prompt = prompt

    # --- the system prompt ------------------------------------------------------------------

    def freeze(self) -> Gen[str]:
        stored = yield from self._read_cache()
        if stored is not None:
            self.snapshot = stored
            return stored
        if self.snapshot is None:
            yield from self.ensure_ready()
            self.snapshot = self.render()
        yield from self._write_cache(self.snapshot)
        return self.snapshot

    def refresh(self) -> Gen[str]:
        yield from self.reload()
        prompt = self.render()
        self.snapshot = prompt
        yield from self._write_cache(prompt)
        return prompt

    def system_prompt(self) -> Gen[str]:
        if self.snapshot is not None:
            return self.snapshot
        return (yield from self.freeze())

    def prompt_for_estimate(self) -> Gen[str]:
        """The frozen prompt, else the cached one, else one rendered now and not kept."""
        if self.snapshot is not None:
            return self.snapshot
        stored = yield from self._read_cache()
        if stored is not None:
            return stored
        yield from self.ensure_ready()
        return self.render()

    def token_estimate(self) -> Gen[int]:
        base = yield Call(self.session.get_token_estimate)
        prompt = yield from self.prompt_for_estimate()
        return int(base) + (self.count(prompt) if prompt else 0)

    def compact_after(self, threshold: int | None) -> Gen[None]:
        if threshold is not None:
            yield from self.ensure_ready()
            yield from self._read_cache()
        extra = self.prompt_tokens_now if threshold is not None else None
        yield Call(self.session.compact_after, (threshold,), {"extra_tokens": extra})

    # --- blocks -----------------------------------------------------------------------------

    def get_block(self, label: str) -> Gen[ContextBlock | None]:
        yield from self.ensure_ready()
        block = self.blocks.get(label)
        return None if block is None else block.view()

    def get_blocks(self) -> Gen[list[ContextBlock]]:
        yield from self.ensure_ready()
        return self.views()

    def replace_block(self, label: str, content: str) -> Gen[ContextBlock]:
        if not isinstance(content, str):
            raise TypeError(f"content must be a string, not {type(content).__name__}")
        yield from self.ensure_ready()
        block = self.blocks.get(label)
        if block is None or not is_writable(block.provider):
            raise ContextError(f'Block "{label}" is readonly', label)
        if block.keyed:
            raise ContextError(
                f'Block "{label}" is a keyed provider. Use set_skill() or set_search_entry() '
                "instead.",
                label,
            )
        tokens = self.count(content)
        limit = block.config.max_tokens
        if limit and tokens > limit:
            raise ContextError(f'Block "{label}" exceeds maxTokens: {tokens} > {limit}', label)
        yield Call(block.provider.set, (content,))
        block.content = content
        block.tokens = tokens
        return block.view()

    def append_block(self, label: str, content: str) -> Gen[ContextBlock]:
        if not isinstance(content, str):
            raise TypeError(f"content must be a string, not {type(content).__name__}")
        yield from self.ensure_ready()
        block = self.blocks.get(label)
        if block is None:
            raise ContextError(f'Block "{label}" not found', label)
        old = block.content
        joiner = "\n" if old and not content.startswith("\n") else ""
        return (yield from self.replace_block(label, old + joiner + content))

    def add_block(self, config: ContextBlockConfig) -> Gen[ContextBlock]:
        yield from self.ensure_ready()
        if config.label in self.blocks:
            raise ContextError(f'Block "{config.label}" already exists', config.label)
        block = self._block(config)
        yield from self._load(block)
        self.blocks = {**self.blocks, config.label: block}
        self.configs[config.label] = config
        if is_skill(block.provider) and not self.restored:
            yield from self._restore()
        return block.view()

    # --- skills and search ------------------------------------------------------------------

    def _labels(self, test: Callable[[object], bool]) -> str:
        return ", ".join(b.label for b in self.blocks.values() if test(b.provider))

    def _skill_block(self, label: str) -> _Block:
        block = self.blocks.get(label)
        if block is None or not is_skill(block.provider):
            raise ContextError(
                f'"{label}" is not a skill block. Skill blocks: {self._labels(is_skill)}', label
            )
        return block

    def _search_block(self, label: str) -> _Block:
        block = self.blocks.get(label)
        if block is None or not is_searchable(block.provider):
            raise ContextError(
                f'"{label}" is not searchable. Searchable blocks: {self._labels(is_searchable)}',
                label,
            )
        return block

    def set_skill(
        self, label: str, key: str, content: str, description: str | None = None
    ) -> Gen[None]:
        yield from self.ensure_ready()
        block = self._skill_block(label)
        if not is_writable(block.provider):
            raise ContextError(f'Block "{label}" is readonly', label)
        args = (key, content) if description is None else (key, content, description)
        yield Call(block.provider.set, args)
        yield from self._reget(block)

    def set_search_entry(self, label: str, key: str, content: str) -> Gen[None]:
        yield from self.ensure_ready()
        block = self._search_block(label)
        if not is_writable(block.provider):
            raise ContextError(f'Block "{label}" is readonly', label)
        yield Call(block.provider.set, (key, content))
        yield from self._reget(block)

    def load_skill(self, label: str, key: str) -> Gen[str | None]:
        yield from self.ensure_ready()
        block = self._skill_block(label)
        document = yield Call(block.provider.load, (key,))
        if document is None:
            return None
        document = _text(document, label)
        self.loaded[f"{label}:{key}"] = None
        return document

    def unload_skill(self, label: str, key: str) -> Gen[bool]:
        yield from self.ensure_ready()
        self._skill_block(label)
        item = f"{label}:{key}"
        if item not in self.loaded:
            return False
        del self.loaded[item]
        found: list[dict[str, Any]] = []

        def consume(message: Any) -> bool:
            rewritten = unloaded_copy(message, label, key)
            if rewritten is not None:
                found.append(rewritten)
                return True
            return False

        yield Scan(self.session.history, consume, {"newest_first": True})
        if found:
            yield Call(self.session.update_message, (found[0],))
        if self.on_unload is not None:
            yield Call(self.on_unload, (label, key))
        return True

    def loaded_skills(self) -> Gen[set[str]]:
        yield from self.ensure_ready()
        return set(self.loaded)

    def search(self, label: str, query: str) -> Gen[str | None]:
        yield from self.ensure_ready()
        block = self._search_block(label)
        result = yield Call(block.provider.search, (query,))
        return None if result is None else _text(result, label)

    # --- tools ------------------------------------------------------------------------------

    def tools(self) -> Gen[list[ToolDefinition]]:
        yield from self.ensure_ready()
        return build_tools(self.views(), self.loaded)

    def execute(self, name: str, arguments: object) -> Gen[str]:
        """Run one memory tool call (see :func:`~._execute.execute`)."""
        return (yield from execute(self, name, arguments))

