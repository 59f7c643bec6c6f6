"""Converters between stored UIMessages and the message formats Python agent code holds.

Four formats, both directions (plain JSON in, plain JSON out; no SDK is imported):

=====================  ======================================================================
``openai-chat``        OpenAI Chat Completions ``messages``
``openai-responses``   OpenAI Responses ``input`` items (what the Agents SDK keeps in sessions)
``anthropic``          Anthropic Messages ``messages`` (and the ``system`` parameter)
``pydantic-ai``        pydantic-ai ``ModelMessage`` JSON, as
                       ``ModelMessagesTypeAdapter.dump_python(messages, mode="json")`` gives it
=====================  ======================================================================

``from_<format>(messages)`` returns UIMessages ready for ``session.append_message``;
``to_<format>(ui_messages)`` renders UIMessages back. What the UIMessages hold:

- Text as ``text`` parts (searchable); images, audio and documents as ``file`` parts whose ``url``
  is a data URL when the source carried the bytes, so the store moves them out of the row.
- A tool call and its result share one ``tool-<name>`` part (``toolCallId``, ``state``, ``input``,
  ``output``), paired by call id; the assistant turn that called it, the results and the turn that
  read them form one assistant UIMessage, steps separated by ``step-start`` parts. A result whose
  call is not in the same turn becomes a ``dynamic-tool`` part with ``input`` ``None``; when
  the integrations find that call in an earlier stored message, they give the part the call's
  name and ``input`` and name the call's message under
  ``callProviderMetadata.convostore.callMessage`` (:data:`CALL_MESSAGE_KEY`): renderers then
  render it as that call's result only.
- Arguments given as a JSON string are parsed into ``input``; the original string is kept under
  ``callProviderMetadata.convostore.arguments`` whenever re-serialising would not give it back.
- Reasoning (OpenAI reasoning items with ``encrypted_content``, Anthropic ``thinking`` with its
  ``signature`` and ``redacted_thinking``, pydantic-ai thinking parts) becomes a ``reasoning``
  part whose ``providerMetadata.convostore`` holds the original item verbatim and names its
  ``provider`` and ``format``. Items no part type fits (compaction items, refusals, server tool
  calls, ...) become ``data-convostore-raw`` parts holding the item verbatim. Both are kept under
  keys the store's sanitiser leaves alone, and are dropped only when rendering for a different
  format (reasoning: a different provider).
- ``metadata.convostore`` records how the source messages were laid out (every field the parts do
  not carry, with holes where part values go). Rendering a UIMessage back to the format it came
  from fills the holes from the current parts, so ``to_x(from_x(m)) == m`` exactly; a UIMessage
  from elsewhere, or one whose parts no longer match the layout, is rendered from its parts alone.

Message ids are generated (the source formats have none that are unique per message).
"""

from __future__ import annotations

from . import _anthropic, _openai_chat, _openai_responses, _pydantic_ai
from ._anthropic import from_anthropic, to_anthropic, to_anthropic_system
from ._openai_chat import from_openai_chat, to_openai_chat
from ._openai_responses import from_openai_responses, to_openai_responses
from ._parts import CALL_MESSAGE_KEY, RAW_PART_TYPE
from ._parts import JSON as JSON  # public before formats became a package, not in __all__
from ._parts import Part as Part  # likewise
from ._pydantic_ai import from_pydantic_ai, to_pydantic_ai

__all__ = [
    "CALL_MESSAGE_KEY",
    "FORMATS",
    "RAW_PART_TYPE",
    "from_anthropic",
    "from_openai_chat",
    "from_openai_responses",
    "from_pydantic_ai",
    "to_anthropic",
    "to_anthropic_system",
    "to_openai_chat",
    "to_openai_responses",
    "to_pydantic_ai",
]

FORMATS = tuple(
    module.FORMAT.name
    for module in (_openai_chat, _openai_responses, _anthropic, _pydantic_ai)
)
"""The format names used in ``metadata.convostore.format`` and in provider tags."""
