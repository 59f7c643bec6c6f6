"""MkDocs hooks for the documentation site (mkdocs.yml ``hooks:``).

The docstrings cross-reference in Sphinx's roles (``:meth:`compact```); mkdocstrings renders
the Markdown around them, leaving ``:meth:`` before the code span. The reference shows the
name as code without the role.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):(?=<code>)")
# Sphinx's ``~a.b.C`` shows the last name only
_TILDE = re.compile(r"<code>~\.?(?:\w+\.)*(\w+)</code>")


def on_page_content(html: str, **kwargs: Any) -> str:
    """Drop Sphinx role prefixes left in front of code spans, and the ``~`` of short names."""
    return _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html))
