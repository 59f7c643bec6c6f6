"""Drop-in stores for agent frameworks, each behind its own optional extra.

=================================  ==========================  ===============================
module                             framework                   install
=================================  ==========================  ===============================
``integrations.openai_agents``     OpenAI Agents SDK           ``convostore[openai-agents]``
``integrations.langchain``         LangChain (core)            ``convostore[langchain]``
``integrations.pydantic_ai``       pydantic-ai                 ``convostore[pydantic-ai]``
``integrations.langgraph``         LangGraph (checkpointer)    ``convostore[langgraph]``
``integrations.adk``               Google ADK (sessions)       ``convostore[adk]``
``integrations.llama_index``       LlamaIndex (chat store)     ``convostore[llama-index]``
=================================  ==========================  ===============================

Importing :mod:`convostore` never imports a framework; importing one of these modules without
its framework raises :class:`~convostore.MissingDependency` naming the package and the extra to
install.

What every integration object shares (``_binding.py``, ``_store_ref.py``, ``_shared.py``,
``_turns.py``):

- given a URL or path, it opens nothing until its first call, then shares the process's one
  store for that URL and options (reference-counted; closed with its last user and at
  interpreter exit), so a service may build one per request;
- it is a context manager (``with`` and ``async with``) with ``close()`` (and ``aclose()``);
  used after ``close()`` it raises :class:`SessionClosed`, a ``RuntimeError``;
- its async methods run their I/O on worker threads, in call order; a cancelled write
  surfaces its cancellation once the write's outcome is known.

Tool results the frameworks store apart from their call (an Agents SDK
``function_call_output``, a pydantic-ai tool return) are paired with it (``_pairing.py``).
"""

from __future__ import annotations

from ..errors import MissingDependency
from ._store_ref import SessionClosed

__all__ = ["SessionClosed"]


def missing(module: str, framework: str, package: str, extra: str) -> MissingDependency:
    """The error raised when an integration's framework is not installed.

    :param module: the integration module's name (``openai_agents``).
    :param framework: the framework's name, for the message (``the OpenAI Agents SDK``).
    :param package: the PyPI package that provides it (``openai-agents``).
    :param extra: the convostore extra that installs it.

    The caller raises it ``from`` the original ``ImportError``.
    """
    return MissingDependency(
        f"convostore.integrations.{module} needs {framework} (the {package} package), which "
        f"is not installed: pip install 'convostore[{extra}]'"
    )
