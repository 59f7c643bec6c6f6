"""``convostore mcp``: the command that runs the MCP server (:mod:`convostore.mcp`).

Registered by :mod:`convostore.cli` with its store opener. The SDK (the ``mcp`` extra) is
imported only when the command runs: without it, ``MissingDependency`` names the extra.

Over stdio (the default) stdout carries the protocol and nothing else; the one line that says
what is served goes to stderr. Over HTTP the socket is bound here, before the server starts,
as ``serve`` does: a port in use is a one-line error, ``--port 0`` picks a free one, and the
URL printed is the one bound.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ..backends._engines import display_url
from ..errors import MissingDependency
from ..store import Sessions
from ._serve import bind, is_loopback
from ._text import Output

__all__ = ["DEFAULT_PORT", "register"]

DEFAULT_PORT = 8766
PATH = "/mcp"

SUMMARY = "serve the conversations to agents over the Model Context Protocol"
DESCRIPTION = (
    "Run an MCP server over the database, so an agent (Claude Desktop, an IDE, any\n"
    "MCP client) can list, search and read its conversations: over stdio (the\n"
    "default; the client starts this command), or over streamable HTTP with --http\n"
    "(127.0.0.1 unless --host says otherwise; the endpoint is /mcp). Read-only\n"
    "unless --allow-writes. Needs: pip install 'convostore[mcp]'. See docs/mcp.md."
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true",
                        help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", metavar="HOST", default="127.0.0.1",
                        help="with --http: address to listen on (default: 127.0.0.1, this "
                             "machine only; the server has no login)")
    parser.add_argument("--port", metavar="PORT", type=int, default=DEFAULT_PORT,
                        help=f"with --http: port to listen on (default: {DEFAULT_PORT}; 0 "
                             "picks a free one)")
    parser.add_argument("--allow-writes", "--writable", dest="writable", action="store_true",
                        help="also offer append_message and the memory tools set_context, "
                             "load_context, search_context (the database is created if "
                             "missing)")
    parser.add_argument("--owner", metavar="ID",
                        help="confine every tool to this owner's conversations (others "
                             "answer 'not found')")


def _create_server() -> Any:
    """``convostore.mcp.create_server``, or MissingDependency naming the extra."""
    try:
        from ..mcp import create_server
    except MissingDependency:
        raise  # the package says which extra
    except ImportError as exc:
        raise MissingDependency(
            f"the MCP server needs {exc.name or 'its dependencies'}: "
            "pip install 'convostore[mcp]'"
        ) from exc
    return create_server


def _serve_http(server: Any, args: argparse.Namespace, shown: str, out: Output) -> None:
    import uvicorn

    sock = bind(args.host, args.port)
    try:
        port = sock.getsockname()[1]
        host = f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
        mode = "read-write" if args.writable else "read-only"
        out.line(f"convostore mcp: {shown} at http://{host}:{port}{PATH} ({mode}; Ctrl-C "
                 "stops it)")
        if not is_loopback(args.host):
            print(f"convostore mcp: warning: listening on {args.host}: anyone who can reach "
                  f"this machine on port {port} can read every conversation (the server has "
                  "no login)", file=sys.stderr)
        out.stream.flush()
        app = server.streamable_http_app(streamable_http_path=PATH, host=args.host)
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def run(args: argparse.Namespace, out: Output,
        opener: Callable[..., Sessions]) -> None:
    """Serve until the client goes away (stdio) or Ctrl-C; the store is closed on the way out."""
    create_server = _create_server()
    shown = display_url(args.db)
    with opener(args.db, create=args.writable) as store:
        server = create_server(store, writable=args.writable, owner=args.owner)
        if args.http:
            _serve_http(server, args, shown, out)
            return
        mode = "read-write" if args.writable else "read-only"
        print(f"convostore mcp: serving {shown} over stdio ({mode})", file=sys.stderr)
        server.run()


def register(command: Callable[..., argparse.ArgumentParser], db: argparse.ArgumentParser,
             opener: Callable[..., Sessions]) -> None:
    """Add ``mcp`` to the command line (``command`` is the CLI's subcommand factory)."""
    _add_arguments(command("mcp", lambda args, out: run(args, out, opener), SUMMARY,
                           DESCRIPTION, [db]))
