"""Write the async faces from the sync ones: AsyncSessions, AsyncSession, AsyncSessionManager.

    python tools/gen_async.py           # rewrite the generated modules
    python tools/gen_async.py --check   # exit 1 when one of them is stale

Each async method runs the same-named sync method on the store's worker threads, so its
signature, defaults, annotations and the summary of its docstring are read from the sync source
(``inspect`` finds the method, ``ast`` reads its text). The rules are mechanical: a method
becomes a coroutine awaiting the sync call; one returning an ``Iterator`` becomes a plain method
returning an async iterator pulled one item per step; one returning its own class (configuration)
stays plain and returns the async handle; a property is forwarded. What cannot be derived is
declared in :data:`FACES` below: methods written by hand in a base class (opening, closing,
watching...), methods that stay plain, searches that build the index first, argument and
result conversions. tests/test_aio_generated.py runs the check, so a changed sync signature fails
the suite until the async faces are regenerated.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convostore.manager import HistorySearchProvider, SessionManager
from convostore.session import Session
from convostore.store import Sessions

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
COMMAND = "python tools/gen_async.py"
WIDTH = 100


@dataclass
class Face:
    """How one async class is derived from its sync twin."""

    sync: type
    """The sync class whose public members are mirrored."""
    name: str
    """The async class."""
    base: tuple[str, str]
    """The hand-written base class (module, name): state and what :attr:`hand` lists."""
    doc: str
    """The async class's docstring."""
    target: str
    """The expression of the wrapped sync object."""
    run: str
    """Awaitable runner: ``run(fn, *args, **kwargs)`` runs ``fn`` on a worker."""
    iterate: str = ""
    """Stream runner: ``iterate(fn, *args, **kwargs)`` is an async iterator over ``fn``'s."""
    index: str = ""
    """What builds the search index before a search (a search then never blocks a worker)."""
    hand: frozenset[str] = frozenset()
    """Public members the base class writes by hand (their async form is not a derivation)."""
    plain: frozenset[str] = frozenset()
    """Methods that do no I/O: called directly, not awaited."""
    searches: frozenset[str] = frozenset()
    """Methods that build the index (:attr:`index`) before running."""
    opener: frozenset[str] = frozenset()
    """Class methods that open a store with :class:`~convostore.store.StoreOptions`."""
    args: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per method, arguments passed converted: ``{method: {param: expression}}``."""
    notes: dict[str, str] = field(default_factory=dict)
    """Per method, a paragraph added to the derived docstring."""


@dataclass
class Module:
    """One generated module."""

    path: str
    """Relative to the repository root."""
    doc: str
    faces: list[Face]
    imports: dict[str, str] = field(default_factory=dict)
    """Extra names the conversions use: ``{name: absolute module}``."""


RENAMES = {
    "Iterator": ("AsyncIterator", "collections.abc"),
    "Session": ("AsyncSession", "convostore.aio._session"),
    "Sessions": ("AsyncSessions", "convostore.aio._store"),
    "HistorySearchProvider": ("AsyncHistorySearchProvider", "convostore.manager._async"),
}
"""Sync types and their async twins, in every annotation of the generated code."""

RESULTS = {
    "Session": "self._store.session({}.session_id)",
    "HistorySearchProvider": "AsyncHistorySearchProvider(self._store, {})",
}
"""Results converted to the async twin (by the sync return annotation)."""

ITERATOR_NOTE = (
    "Not awaited: an async iterator. Each step pulls one item from the sync stream on a "
    "worker thread, so memory stays bounded as in the sync read; breaking out early reads "
    "nothing more."
)

MODULES = [
    Module(
        "src/convostore/aio/_session.py",
        "AsyncSession: every method of :class:`~convostore.Session`, awaited on the store's "
        "workers.",
        [Face(
            Session, "AsyncSession", ("convostore.aio._handle", "AsyncSessionBase"),
            "Async twin of :class:`~convostore.Session`: every method awaited, same names and "
            "options.\n\nGet one with ``store.session(session_id)`` (cached per id). "
            "Configuration methods\n(:meth:`on_compaction`, :meth:`compact_after`, "
            ":meth:`on_compaction_error`) are plain and\nchainable; :meth:`history`, "
            ":meth:`history_records` and :meth:`history_batches` are async\niterators.",
            target="self._session", run="self._call", iterate="self._iterate",
            index="self._store.build_search_index()",
            hand=frozenset({"store"}),
            searches=frozenset({"search"}),
            args={"on_compaction": {"fn": "on_loop(fn)"}},
            notes={
                "on_compaction": "``fn`` may be async: it is awaited on the loop that opened "
                "the store (a\n:func:`~convostore.create_compact_function` with an async "
                "``summarize`` is registered\nthrough its ``acall``).",
                "on_compaction_error": "``handler`` may be async (awaited on the loop).",
                "compact": "An async compaction function runs on the loop; a plain one holds "
                "a worker while it\nruns.",
            },
        )],
        imports={"on_loop": "convostore.aio._handle"},
    ),
    Module(
        "src/convostore/aio/_store.py",
        "AsyncSessions: every method of :class:`~convostore.Sessions`, awaited on the store's "
        "workers.",
        [Face(
            Sessions, "AsyncSessions", ("convostore.aio._base", "AsyncStoreBase"),
            "Async twin of :class:`~convostore.Sessions`: the same store, its methods awaited."
            "\n\nOpen one with ``await AsyncSessions.open(url)`` or ``async with "
            "AsyncSessions.open(url) as\nstore:``. The store belongs to the event loop that "
            "opened it: use it from that loop only.",
            target="self._sync", run="self._call", index="self.build_search_index()",
            hand=frozenset({"close", "closed", "session", "watch", "wait_for_compactions",
                            "build_search_index"}),
            plain=frozenset({"subscribe"}),
            searches=frozenset({"search"}),
            opener=frozenset({"open"}),
            notes={
                "open": "The database is opened on the store's worker thread, so the loop is "
                "not blocked.\nReturns an :class:`Opening`: await it (``store = await "
                "AsyncSessions.open(...)``) or\nenter it (``async with AsyncSessions.open(...) "
                "as store:``, closing the store on exit).",
                "subscribe": "``listener`` may be ``async``: it is awaited on the loop that "
                "opened the store before\nthe write call returns; a plain one runs on the "
                "worker thread. The returned\nunsubscribe function is plain.",
            },
        )],
        imports={"StoreOptions": "convostore._options",
                 "document_options": "convostore._options",
                 "Opening": "convostore.aio._base"},
    ),
    Module(
        "src/convostore/manager/_async.py",
        "The session manager's async side: :class:`AsyncSessionManager` and its search "
        "provider.\n\nEach method runs the same-named method of the sync manager (over "
        "``store.sync``) on the\nstore's worker, through "
        ":meth:`~convostore.AsyncSessions.run_sync`; nothing here reads or\nwrites the "
        "registry itself. Published by :mod:`convostore.manager`.",
        [
            Face(
                SessionManager, "AsyncSessionManager",
                ("convostore.manager._async_base", "AsyncManagerBase"),
                "Async twin of :class:`SessionManager`, over an "
                ":class:`~convostore.AsyncSessions`.\n\nEach method runs the same-named "
                ":class:`SessionManager` method on the store's worker.",
                target="self._sync", run="self._store.run_sync",
                hand=frozenset({"store"}),
                plain=frozenset({"tools", "with_searchable_history"}),
            ),
            Face(
                HistorySearchProvider, "AsyncHistorySearchProvider",
                ("convostore.manager._async_base", "AsyncProviderBase"),
                "Async twin of :class:`HistorySearchProvider`: its methods run on the store's "
                "worker.\n\n:param store: the async store whose worker runs ``provider``'s "
                "methods.\n:param provider: the sync provider, over the manager of "
                "``store.sync``.",
                target="self._provider", run="self._store.run_sync",
            ),
        ],
    ),
]
"""Every generated module: what cannot be derived is declared here."""


# --- reading the sync source -------------------------------------------------------------------


@dataclass
class Param:
    """One parameter as written in the sync source."""

    name: str
    kind: str  # "positional", "keyword", "star", "starstar", "marker" (a bare ``*``)
    annotation: str | None
    default: str | None


@dataclass
class Method:
    """One public member of a sync class."""

    name: str
    member: Any
    fn: Callable[..., Any]
    params: list[Param]
    returns: str | None
    summary: str


def public_members(cls: type) -> list[str]:
    """Public names defined by ``cls`` and its bases, base classes' first, in source order."""
    names: dict[str, None] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name in vars(klass):
            if not name.startswith("_"):
                names.setdefault(name)
    return list(names)


def _function(member: Any) -> Callable[..., Any]:
    """The function behind a class member: a property's getter, a classmethod's function."""
    fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
    assert callable(fn), member
    return fn


def read_method(cls: type, name: str) -> Method:
    member = inspect.getattr_static(cls, name)
    fn = _function(member)
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef), name

    def text(expr: ast.expr | None) -> str | None:
        return None if expr is None else ast.get_source_segment(source, expr)

    a = node.args
    positional = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults))
    defaults += a.defaults
    params = [Param(p.arg, "positional", text(p.annotation), text(d))
              for p, d in zip(positional, defaults, strict=True)]
    if a.vararg is not None:
        params.append(Param(a.vararg.arg, "star", text(a.vararg.annotation), None))
    elif a.kwonlyargs:
        params.append(Param("", "marker", None, None))
    params += [Param(p.arg, "keyword", text(p.annotation), text(d))
               for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    if a.kwarg is not None:
        params.append(Param(a.kwarg.arg, "starstar", text(a.kwarg.annotation), None))
    doc = inspect.cleandoc(fn.__doc__ or "")
    return Method(name, member, fn, params[1:], text(node.returns), doc.split("\n\n")[0])


# --- imports -------------------------------------------------------------------------------------


def module_bindings(module: str) -> dict[str, tuple[str, str]]:
    """What each top-level name of ``module`` is: ``{name: (absolute module, name there)}``."""
    mod = sys.modules[module]
    path = Path(mod.__file__ or "")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                out.setdefault(alias.asname or alias.name, (source, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                out.setdefault(alias.asname or alias.name, ("", alias.name))
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = (module, node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = (module, target.id)
    return out


def names_in(text: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}


def import_lines(here: str, wanted: dict[str, str]) -> list[str]:
    """Import statements for ``{name: absolute module}`` (``""``: ``import name``), in the
    order ruff's isort keeps: standard library, then the package's relative imports."""
    std_plain = sorted(n for n, m in wanted.items() if m == "")
    std_from: dict[str, set[str]] = {}
    local: dict[tuple[int, str], set[str]] = {}
    package = here.rpartition(".")[0].split(".")
    for name, module in wanted.items():
        if module == "":
            continue
        if not module.startswith("convostore"):
            std_from.setdefault(module, set()).add(name)
            continue
        parts = module.split(".")
        common = 0
        while common < min(len(parts), len(package)) and parts[common] == package[common]:
            common += 1
        level = len(package) - common + 1
        local.setdefault((level, ".".join(parts[common:])), set()).add(name)

    def order(name: str) -> tuple[int, str]:
        kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
        return kind, name

    def line(prefix: str, names: set[str]) -> str:
        joined = ", ".join(sorted(names, key=order))
        one = f"{prefix} import {joined}"
        if len(one) <= WIDTH:
            return one
        inner = "".join(f"    {n},\n" for n in sorted(names, key=order))
        return f"{prefix} import (\n{inner})"

    lines = ["from __future__ import annotations", ""]
    std = [f"import {n}" for n in std_plain]
    std += [line(f"from {m}", names) for m, names in sorted(std_from.items())]
    if std:
        lines += [*std, ""]
    lines += [line(f"from {'.' * level}{mod}", names)
              for (level, mod), names in sorted(local.items(), key=lambda i: (-i[0][0], i[0][1]))]
    return lines


# --- writing the async source --------------------------------------------------------------------


def rename(text: str) -> str:
    for old, (new, _module) in RENAMES.items():
        text = re.sub(rf"(?<![\w.]){old}\b", new, text)
    return text


def param_text(p: Param) -> str:
    if p.kind == "marker":
        return "*"
    star = {"star": "*", "starstar": "**"}.get(p.kind, "")
    out = star + p.name
    if p.annotation is not None:
        out += f": {rename(p.annotation)}"
        if p.default is not None:
            out += f" = {p.default}"
    elif p.default is not None:
        out += f"={p.default}"
    return out


def wrapped(head: str, items: list[str], tail: str, indent: str) -> str:
    """``head(items)tail`` on one line, else the items on one indented line, else one each."""
    one = f"{indent}{head}{', '.join(items)}{tail}"
    if len(one) <= WIDTH:
        return one
    inner = f"{indent}    {', '.join(items)}"
    if len(inner) <= WIDTH:
        return f"{indent}{head}\n{inner}\n{indent}{tail.lstrip(',')}"
    rows = "".join(f"{indent}    {item},\n" for item in items)
    return f"{indent}{head}\n{rows}{indent}{tail.lstrip(',')}"


def docstring(text: str, indent: str) -> str:
    body = textwrap.indent(text, indent).lstrip()
    return f'{indent}"""{body}\n{indent}"""' if "\n" in text else f'{indent}"""{text}"""'


def call_args(face: Face, m: Method) -> list[str]:
    convert = face.args.get(m.name, {})
    out = []
    for p in m.params:
        value = convert.get(p.name, p.name)
        if p.kind == "positional":
            out.append(value)
        elif p.kind == "keyword":
            out.append(f"{p.name}={value}")
        elif p.kind == "star":
            out.append(f"*{value}")
        elif p.kind == "starstar":
            out.append(f"**{value}")
    return out


def method_text(face: Face, m: Method, used: set[str]) -> str:
    sync_name = face.sync.__name__
    role = "attr" if isinstance(m.member, property) else "meth"
    doc = f"Async twin of :{role}:`{sync_name}.{m.name}`."
    if m.summary:
        doc += "\n\n" + m.summary
    returns = m.returns or "None"
    note = face.notes.get(m.name)
    if note and m.name not in face.opener:
        doc += "\n\n" + note
    ind, body_ind = "    ", "        "
    if isinstance(m.member, property):
        lines = [f"{ind}@property", f"{ind}def {m.name}(self) -> {rename(returns)}:",
                 docstring(doc, body_ind), f"{body_ind}return {face.target}.{m.name}"]
        setter = m.member.fset
        if setter is not None:  # the setter's parameter as the sync source writes it
            source = textwrap.dedent(inspect.getsource(setter))
            node = ast.parse(source).body[0]
            assert isinstance(node, ast.FunctionDef)
            arg = node.args.args[1]
            ann = ast.get_source_segment(source, arg.annotation) if arg.annotation else None
            ann = ann or "Any"
            used.update(names_in(ann))
            lines += ["", f"{ind}@{m.name}.setter",
                      f"{ind}def {m.name}(self, {arg.arg}: {ann}) -> None:",
                      f"{body_ind}{face.target}.{m.name} = {arg.arg}"]
        used.update(names_in(rename(returns)))
        return "\n".join(lines)
    params = [param_text(p) for p in m.params]
    for p in m.params:
        for text in (p.annotation, p.default):
            if text:
                used.update(names_in(rename(text) if text is p.annotation else text))
    call = f"{face.target}.{m.name}"
    args = call_args(face, m)
    for expr in face.args.get(m.name, {}).values():
        used.update(names_in(expr) - {p.name for p in m.params})
    decorators: list[str] = []
    if m.name in face.opener:
        options = [f"{p.name}={p.name}" for p in m.params if p.kind == "keyword"]
        url = m.params[0].name
        decorators = ["@classmethod", "@document_options"]
        head, first, returns_text = "def", "cls", "Opening"
        used.update({"StoreOptions", "document_options", "Opening"})
        body = [wrapped(f"return cls._opening({url}, StoreOptions(", options, "))", body_ind)]
        doc = f"Async twin of :meth:`{sync_name}.{m.name} <convostore.{sync_name}.{m.name}>`, " \
              f"same options.\n\n{face.notes.get(m.name, '')}"
    else:
        first = "self"
        iterator = returns.startswith("Iterator[")
        chain = returns == sync_name
        plain = m.name in face.plain
        convert = RESULTS.get(returns)
        returns_text = rename(returns)
        if iterator:
            head = "def"
            body = [wrapped(f"return {face.iterate}(", [call, *args], ")", body_ind)]
            doc += "\n\n" + "\n".join(textwrap.wrap(ITERATOR_NOTE, WIDTH - 8))
        elif chain:
            head = "def"
            body = [wrapped(f"{call}(", args, ")", body_ind), f"{body_ind}return self"]
        elif plain:
            head = "def"
            result = f"{call}({', '.join(args)})"
            if convert is not None:
                result = convert.format(result)
            body = [wrapped("return ", [result], "", body_ind)]
        else:
            head = "async def"
            body = []
            if m.name in face.searches:
                body.append(f"{body_ind}await {face.index}")
            runner = f"await {face.run}("
            if convert is not None:
                body.append(wrapped(f"result = {runner}", [call, *args], ")", body_ind))
                body.append(f"{body_ind}return {convert.format('result')}")
            elif returns == "None":
                body.append(wrapped(runner, [call, *args], ")", body_ind))
            else:
                body.append(wrapped(f"return {runner}", [call, *args], ")", body_ind))
    used.update(names_in(returns_text))
    signature = wrapped(f"{head} {m.name}(", [first, *params], f") -> {returns_text}:", ind)
    return "\n".join([*(ind + d for d in decorators), signature, docstring(doc.rstrip(), body_ind),
                      *body])


def render(module: Module) -> str:
    """The full text of one generated module."""
    here = module.path.removeprefix("src/").removesuffix(".py").replace("/", ".")
    used: set[str] = set()
    classes = []
    for face in module.faces:
        members = [read_method(face.sync, n) for n in public_members(face.sync)
                   if n not in face.hand]
        methods = [method_text(face, m, used) for m in members]
        base_module, base = face.base
        used.add(base)
        head = f"class {face.name}({base}):\n{docstring(face.doc, '    ')}\n"
        classes.append(head + "\n" + "\n\n".join(methods) + "\n")
    defined = {face.name for face in module.faces}
    sources = {face.base[1]: face.base[0] for face in module.faces}
    for face in module.faces:
        bindings: dict[str, tuple[str, str]] = {}
        for klass in reversed(face.sync.__mro__[:-1]):
            for value in vars(klass).values():
                fn = value.fget if isinstance(value, property) else getattr(
                    value, "__func__", value)
                where = getattr(fn, "__module__", None) or ""
                if inspect.isfunction(fn) and where.startswith("convostore"):
                    bindings.update(module_bindings(where))  # the names its annotations use
        for name in sorted(used - defined - sources.keys()):
            if name in module.imports:
                sources[name] = module.imports[name]
            elif name in {new for new, _ in RENAMES.values()}:
                sources[name] = next(m for new, m in RENAMES.values() if new == name)
            elif name in bindings:
                origin, original = bindings[name]
                if origin == "" or original == name:
                    sources[name] = origin
                else:
                    raise SystemExit(f"{name} is imported under another name: {original}")
            elif not hasattr(builtins, name):
                raise SystemExit(f"cannot tell where {name} comes from ({module.path})")
    sources = {n: m for n, m in sources.items() if m != here}
    header = (
        f"# Generated by {COMMAND} from the sync classes; do not edit by hand.\n"
        f"# Regenerate with `{COMMAND}` (tests/test_aio_generated.py fails if stale).\n"
    )
    doc = docstring(module.doc, "")
    imports = "\n".join(import_lines(here, sources))
    return f"{header}{doc}\n\n{imports}\n\n\n" + "\n\n".join(classes)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated modules, or with ``--check`` report whether they are current."""
    args = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    args.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    check = args.parse_args(argv).check
    stale = []
    for module in MODULES:
        path = ROOT / module.path
        text = render(module)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(module.path)
        if not check:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {module.path}")
    if check and stale:
        print(f"stale: {', '.join(stale)}: run {COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
