"""The runnable examples keep running (offline, deterministic)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize(
    "name", ["compaction.py", "memory_agent.py", "feed_service.py", "langgraph_agent.py"]
)
def test_example_runs(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_compaction_example_compacts() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "compaction.py")], capture_output=True, text=True,
        timeout=120,
    )
    assert "event: compact" in done.stdout
    assert "summary  assistant ## Topic" in done.stdout
    assert "original rows kept: 12" in done.stdout


def test_feed_service_example_streams_and_resumes() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "feed_service.py")], capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "event 1: append q1 leaf=q1",
        "event 3: append a1 leaf=a1",
        "event 4: update a1 leaf=a1",
        "client dropped; reconnecting with Last-Event-ID: 4",
        "event 5: append q2 leaf=q2",
        "event 6: delete ['q2'] leaf=a1",
    ]
def test_langgraph_example_reads_both_branches() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "langgraph_agent.py")], capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "interrupted before: ('tools',)" in done.stdout
    on, earlier = done.stdout.split("the earlier branch:")
    assert "assistant Oslo has snow, -4 C: pack a coat." in on
    assert "assistant Enjoy your trip!" in earlier and "Oslo" not in earlier.split("checkpoints")[0]
