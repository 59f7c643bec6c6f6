"""Auto-compaction with a deterministic local summariser: runs offline, prints what happened.

    python examples/compaction.py

A real application passes an LLM call as ``summarize`` (docs/guides/compaction.md); here the
"model" keeps the first line of every message it is shown, so the output is the same every run.
"""

from __future__ import annotations

import os
import tempfile

from convostore import COMPACTION_PREFIX, Sessions, create_compact_function


def summarize(prompt: str) -> str:
    """A stand-in for a model: one bullet per conversation block of the prompt."""
    bullets = []
    for block in prompt.split("\n---\n"):
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        if len(lines) >= 2 and lines[0].startswith("[") and lines[0].endswith("]"):
            bullets.append(f"- {lines[0][1:-1]}: {lines[1][:60]}")
    return "## Topic\nA long support chat.\n\n## Key Points\n" + "\n".join(bullets)


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="convostore-example-"), "chat.db")
    with Sessions.open(path) as store:
        session = store.session("support")
        session.on_compaction(create_compact_function(summarize, keep_recent_tokens=300))
        session.compact_after(600)  # tokens; checked after every append that inserted a row
        store.subscribe(lambda e: print(f"  event: {e.type}") if e.type == "compact" else None)

        for turn in range(12):
            role = "user" if turn % 2 == 0 else "assistant"
            body = f"turn {turn}: " + ("the deploy is failing on the migration step. " * 6)
            session.append_message(
                {"id": f"m{turn}", "role": role, "parts": [{"type": "text", "text": body}]}
            )
            # The append returned at once; automatic compaction runs in the background. Wait
            # for it here only so that the printout shows it in order.
            store.wait_for_compactions()
            print(f"appended m{turn:<3} estimate now {session.get_token_estimate():>4} tokens")

        print("\nhistory the model sees:")
        for message in session.history():
            first = message["parts"][0]["text"].splitlines()[0]
            marker = "summary" if message["id"].startswith(COMPACTION_PREFIX) else message["id"]
            print(f"  {marker:<8} {message['role']:<9} {first[:60]}")
        print(f"\noverlay records kept: {len(session.get_compactions())}; "
              f"original rows kept: {len(session.get_history_row_stats())}")
        print(f"database: {path}")


if __name__ == "__main__":
    main()
