"""Instructions per ``append_message``, counted by callgrind: a figure that noise cannot move.

Wall-clock figures on a shared 2-core machine wander by 10-30%; the instruction count of the
same work is the same on every run. This script runs ``append_message`` (SQLite, durability
"full", the realistic message stream of ``append.py``) under ``valgrind --tool=callgrind``
twice, with ``--count`` and with twice as many appends, and prints the difference divided by
``--count``: the cost of one more append, with start-up and the store's opening taken out.
It counts the whole process (Python, sqlite3 and the library), not system-call time.

    python benchmarks/instructions.py                 # 200 appends (needs valgrind)
    python benchmarks/instructions.py --count 400
    python benchmarks/instructions.py --turn          # append_messages of 6-message turns

Compare two trees by running it on each (``PYTHONPATH=path/to/src``) in the same session.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))


def child(count: int, turn: bool) -> None:
    """The measured process: open a store, warm it up, then append ``count`` messages."""
    from append import realistic_messages

    from convostore import Sessions

    stream = realistic_messages(seed=7)
    with tempfile.TemporaryDirectory() as tmp, Sessions.open(
        os.path.join(tmp, "bench.db"), durability="full"
    ) as store:
        session = store.session("bench")
        for _ in range(20):  # first appends build caches; they are the same in both runs
            session.append_message(next(stream))
        if turn:
            for _ in range(count):
                session.append_messages([next(stream) for _ in range(6)])
        else:
            for _ in range(count):
                session.append_message(next(stream))


def instructions(count: int, turn: bool) -> int:
    """Total instructions callgrind counts for a child run of ``count`` appends."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             __file__, "--child", str(count)] + (["--turn"] if turn else []),
            capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},  # the same dict layouts in every run
        )
        match = re.search(r"Collected : (\d+)", proc.stderr)
        if not match:
            raise SystemExit(f"no instruction count in callgrind's output:\n{proc.stderr}")
        return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="appends in the smaller run")
    parser.add_argument("--turn", action="store_true", help="6-message append_messages calls")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.turn)
        return 0
    small = instructions(args.count, args.turn)
    large = instructions(2 * args.count, args.turn)
    what = "append_messages (6 messages)" if args.turn else "append_message"
    print(f"{what}: {(large - small) / args.count / 1000:,.0f}k instructions per call "
          f"(callgrind, SQLite FULL, {args.count} vs {2 * args.count} calls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
