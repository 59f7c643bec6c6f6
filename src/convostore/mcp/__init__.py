"""An MCP server over a convostore database: any agent lists, searches and reads its past
conversations, and (when allowed) writes messages and keeps its memory in the store.

Needs the ``mcp`` extra: ``pip install 'convostore[mcp]'`` (the official MCP SDK, 2.x). From
the command line: ``convostore mcp DB`` (stdio) or ``convostore mcp DB --http``; see
``docs/mcp.md``.

    from convostore import Sessions
    from convostore.mcp import create_server

    with Sessions.open("chat.db") as store:
        create_server(store, owner="user-42").run()        # stdio, read-only

Tools: ``list_conversations``, ``search_conversations``, ``read_conversation`` (newest-first
pages of at most 64 KiB) and ``read_message`` (pieces of at most 256 KiB, images described
unless asked for); with ``writable=True`` also ``append_message``, ``set_context``,
``load_context`` and ``search_context``. Resources: ``convostore://sessions/{id}`` (a
conversation as Markdown) and ``convostore://sessions/{id}/messages/{message_id}``.
"""

from __future__ import annotations

try:
    import mcp.server.mcpserver  # noqa: F401 (the SDK, before the modules built on it)
except ImportError as exc:
    from ..errors import MissingDependency

    raise MissingDependency(
        f"the MCP server needs {(exc.name or 'mcp').split('.')[0]}: "
        "pip install 'convostore[mcp]'"
    ) from exc

from ._server import create_server

__all__ = ["create_server"]
