"""The prompt side of a conversation: context blocks, the frozen system prompt, memory tools.

An agent's system prompt is assembled from blocks -- identity, learned facts, loadable skills,
searchable knowledge -- and the model edits its own memory through tools. A :class:`Context` is
composed with a session handle (it does not live inside it)::

    from convostore import Sessions
    from convostore.context import Context, DirectorySkillProvider, StoreSearchProvider

    store = Sessions.open("agent.db")
    context = (
        Context(store.session("chat"))
        .with_context("soul", provider=Soul())              # read-only: get()
        .with_context("memory", description="Learned facts", max_tokens=1100)  # in the store
        .with_context("skills", provider=DirectorySkillProvider("skills/"))
        .with_context("knowledge", provider=StoreSearchProvider(store))
        .with_cached_prompt()
    )
    system = context.freeze_system_prompt()      # frozen: block writes do not change it
    tools = to_openai_tools(context.tools())     # set_context, load_context, ...
    answer = context.execute(name, arguments)    # always a string, never raises
    context.refresh_system_prompt()              # when you want the writes in the prompt

The prompt is rendered exactly as the reference renders it, and the tools answer with the
reference's strings. :class:`AsyncContext` is the same over an
``AsyncSession``.

Store-backed providers keep their data in the same database, in sessions whose ids start with
``convostore:`` (:data:`RESERVED_PREFIX`): ``convostore:context:<key>`` for a block's text and
the cached prompt, ``convostore:search:<label>`` for searchable entries.
"""

from __future__ import annotations

from ._blocks import (
    SEPARATOR,
    ContextBlock,
    ContextBlockConfig,
    ContextError,
    render_system_prompt,
)
from ._context import AsyncContext, Context
from ._providers import ContextProvider, SearchProvider, SkillProvider, WritableContextProvider
from ._skill_files import DirectorySkillProvider
from ._store_providers import (
    CONTEXT_PREFIX,
    RESERVED_PREFIX,
    SEARCH_PREFIX,
    AsyncStoreContextProvider,
    AsyncStoreSearchProvider,
    StoreContextProvider,
    StoreSearchProvider,
)
from ._tools import ToolDefinition, entry_key, to_anthropic_tools, to_openai_tools

__all__ = [
    "CONTEXT_PREFIX",
    "RESERVED_PREFIX",
    "SEARCH_PREFIX",
    "SEPARATOR",
    "AsyncContext",
    "AsyncStoreContextProvider",
    "AsyncStoreSearchProvider",
    "Context",
    "ContextBlock",
    "ContextBlockConfig",
    "ContextError",
    "ContextProvider",
    "DirectorySkillProvider",
    "SearchProvider",
    "SkillProvider",
    "StoreContextProvider",
    "StoreSearchProvider",
    "ToolDefinition",
    "WritableContextProvider",
    "entry_key",
    "render_system_prompt",
    "to_anthropic_tools",
    "to_openai_tools",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = "convostore.context"
del _name, _obj
