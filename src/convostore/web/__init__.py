"""A local, read-only web viewer of a convostore database (``convostore serve``).

Needs the ``web`` extra: ``pip install 'convostore[web]'`` (Starlette, uvicorn, Jinja2).

>>> from convostore.web import create_app
>>> app = create_app("chat.db")          # an ASGI application; run it with uvicorn

Pages: the sessions directory with a cross-session search, and each conversation as a chat
(newest messages first loaded, older ones on demand), with a branch switcher at each fork,
compaction summaries whose original messages expand, tool calls and reasoning folded,
attachments shown or downloadable, and new messages from other processes appearing live.
Every stored string is shown as text.
"""

from __future__ import annotations

from ._app import create_app

__all__ = ["create_app"]
