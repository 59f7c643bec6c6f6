"""Progress bars of the long commands (``dump``, ``restore``, ``migrate``, ``import``,
``index``), drawn with ``rich.progress`` on stderr.

A bar is drawn only when stderr is a terminal and rich (the ``cli`` extra) is installed;
otherwise the commands are quiet, so scripts, pipes and logs get no control sequences. A bar is
transient: it disappears when the work is done, leaving the command's own summary line.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

Update = Callable[[int, "int | None"], None]
"""``update(done, total)``: the work done so far, out of ``total`` (None: not known)."""


def _quiet(done: int, total: int | None) -> None:
    """The update of a bar that is not drawn."""


@contextmanager
def bar(label: str, unit: str, stream: IO[str] | None = None) -> Iterator[Update]:
    """A progress bar for ``label`` counting ``unit`` (``messages``, ``bytes``), on ``stream``
    (default: stderr); yields its update function, a no-op when nothing is drawn."""
    out = sys.stderr if stream is None else stream
    if not out.isatty():
        yield _quiet
        return
    try:
        progress = importlib.import_module("rich.progress")
        console = importlib.import_module("rich.console").Console(file=out)
    except ImportError:
        yield _quiet
        return
    columns = (
        progress.TextColumn("{task.description}"), progress.BarColumn(),
        progress.TextColumn("{task.completed:,}/{task.fields[shown_total]} " + unit),
        progress.TimeElapsedColumn(), progress.TimeRemainingColumn(),
    )
    with progress.Progress(*columns, console=console, transient=True) as shown:
        task = shown.add_task(label, total=None, shown_total="?")

        def update(done: int, total: int | None) -> None:
            shown.update(task, completed=done, total=total,
                         shown_total="?" if total is None else f"{total:,}")

        yield update
