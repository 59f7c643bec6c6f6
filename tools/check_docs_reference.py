"""Check a built documentation site: every public name has its entry in the API reference.

    mkdocs build --strict --site-dir SITE && python tools/check_docs_reference.py SITE

mkdocstrings renders each ``::: module`` of docs/reference/*.md, but a listed member it cannot
find is left out without a warning, so ``--strict`` alone does not prove the reference complete.
This reads each directive, imports the module, and looks in the built page for the anchor of
every name of its ``__all__`` (``id="convostore.AppendResult"``). Exit 1 naming what is missing.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "reference"


def missing_entries(site: Path) -> list[str]:
    """``page: module.name`` for each public name without an anchor in the built page."""
    missing = []
    for page in sorted(DOCS.glob("*.md")):
        html = (site / "reference" / page.stem / "index.html").read_text(encoding="utf-8")
        for line in page.read_text(encoding="utf-8").splitlines():
            if not line.startswith("::: "):
                continue
            module = line[4:].strip()
            if f'id="{module}"' not in html:
                missing.append(f"{page.name}: {module}")
            for name in getattr(importlib.import_module(module), "__all__", ()):
                if f'id="{module}.{name}"' not in html:
                    missing.append(f"{page.name}: {module}.{name}")
    return missing


def main() -> int:
    """Report the names without an entry; 0 when the reference is complete."""
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    missing = missing_entries(Path(sys.argv[1]))
    for entry in missing:
        print(f"no reference entry: {entry}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
