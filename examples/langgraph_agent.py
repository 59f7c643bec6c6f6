"""A LangGraph agent with a tool, checkpointed by convostore, fully offline.

The model is LangChain's ``GenericFakeChatModel`` playing a script: it calls a weather tool,
answers, then answers again. The graph stops before the tool runs (``interrupt_before``), is
resumed, takes a second turn, and then is forked: resumed from the checkpoint after the first
turn with a different question. The thread's conversation is mirrored into the convostore
session named by the thread id, so both branches can be read back as UIMessages, and a
process that never imported LangGraph (``convostore show``) sees them too.

Run: ``python examples/langgraph_agent.py`` (needs ``pip install 'convostore[langgraph]'``)
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from convostore.integrations.langgraph import ConvostoreSaver


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return {"Paris": "Sunny, 21 C.", "Oslo": "Snow, -4 C."}.get(city, "Unknown.")


def call(city: str, call_id: str) -> AIMessage:
    """The scripted model asking for the weather."""
    return AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": city},
                                      "id": call_id}])


SCRIPT = [
    call("Paris", "call-1"), AIMessage("It is sunny in Paris, 21 C."),
    AIMessage("Enjoy your trip!"),
    call("Oslo", "call-2"), AIMessage("Oslo has snow, -4 C: pack a coat."),
]


def build(saver: ConvostoreSaver) -> Any:
    """agent -> (tools -> agent)* -> end, stopping before each tool call."""
    model = GenericFakeChatModel(messages=iter(SCRIPT))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([get_weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver, interrupt_before=["tools"])


def show(title: str, history: list[dict[str, Any]]) -> None:
    print(title)
    for message in history:
        text = " ".join(p["text"] for p in message["parts"] if p.get("type") == "text")
        print(f"  {message['role']:<9} {text or '(tool call)'}")


def main() -> None:
    path = Path(tempfile.mkdtemp()) / "agent.db"
    with ConvostoreSaver(str(path)) as saver:
        graph = build(saver)
        config: RunnableConfig = {"configurable": {"thread_id": "trip"}}

        graph.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, config)
        print("interrupted before:", graph.get_state(config).next)
        graph.invoke(None, config)  # approve: the tool runs, the model answers
        graph.invoke({"messages": [HumanMessage("Thanks!")]}, config)
        first_leaf = saver.store.session("trip").get_latest_leaf()

        # time travel: back to the checkpoint after the first answer, ask something else
        after_first = next(s for s in graph.get_state_history(config)
                           if s.next == () and len(s.values["messages"]) == 4)
        graph.invoke({"messages": [HumanMessage("And in Oslo?")]}, after_first.config)
        graph.invoke(None, config)

        mirror = saver.store.session("trip")
        show("branch the thread is on:", mirror.get_history())
        assert first_leaf is not None
        show("the earlier branch:", mirror.get_history(first_leaf["id"]))
        print("checkpoints:", len(list(saver.list(config))))
        print("search 'coat':", [hit.content for hit in mirror.search("coat")])
        print(f"try: convostore show {path} trip")


if __name__ == "__main__":
    main()
