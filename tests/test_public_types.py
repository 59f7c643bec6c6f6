"""Public signatures name only public things.

Every type named in the signature of a public function, method, property or constructor of a
public module is public itself: defined in a public module (no ``_`` in its path), or exported
(listed in a public module's ``__all__``, or defined at the top of one without ``__all__``).
A type alias counts by its name (``Moment``, ``Listener``); a class by its ``__module__``.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import inspect
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PUBLIC_MODULES = [
    "convostore",
    "convostore.aio",
    "convostore.session",
    "convostore.store",
    "convostore.errors",
    "convostore.model",
    "convostore.codec",
    "convostore.tokens",
    "convostore.limits",
    "convostore.compaction",
    "convostore.check",
    "convostore.mcp",
    "convostore.dump",
    "convostore.manager",
    "convostore.context",
    "convostore.formats",
    "convostore.web",
    "convostore.cli",
    "convostore.backends.sqlite",
    "convostore.backends.postgres",
    "convostore.integrations",
    "convostore.integrations.langchain",
    "convostore.integrations.langgraph",
    "convostore.integrations.openai_agents",
    "convostore.integrations.pydantic_ai",
    "convostore.integrations.adk",
    "convostore.integrations.llama_index",
]
"""The public modules (an integration whose framework is missing is left out)."""


def _load(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # an optional framework or the web extra is not installed
        return None


MODULES = [m for m in map(_load, PUBLIC_MODULES) if m is not None]


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _top_level_names(module: ModuleType) -> frozenset[str]:
    """Names a module defines at its top level (classes, functions, assignments)."""
    return _top_level_names_of(module.__name__)


@functools.cache
def _top_level_names_of(module_name: str) -> frozenset[str]:
    path = getattr(sys.modules[module_name], "__file__", None)
    if path is None:
        return frozenset()
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def public_names(module: ModuleType) -> list[str]:
    """``__all__``, else the public names the module itself defines."""
    listed = getattr(module, "__all__", None)
    if listed is not None:
        return list(listed)
    return sorted(n for n in _top_level_names(module) if not n.startswith("_"))


EXPORTED: dict[int, str] = {
    id(getattr(m, n)): f"{m.__name__}.{n}"
    for m in MODULES for n in public_names(m) if hasattr(m, n)
}
"""Every public object, by identity."""

ALIAS_NAMES = {
    name
    for mod_name, mod in list(sys.modules.items())
    if mod_name.startswith("convostore") and mod is not None
    for name in _top_level_names(mod)
}
"""Names some convostore module defines: a value under one of them is convostore's."""

NAMESPACE: dict[str, Any] = {
    n: getattr(m, n) for m in reversed(MODULES) for n in public_names(m) if hasattr(m, n)
}
"""Where an annotation's name is looked up when its module imports it for type checking only."""


def _members(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The public callables of a class (constructor included) defined by convostore."""
    for klass in cls.__mro__:
        if not klass.__module__.startswith("convostore"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") and name != "__init__":
                continue
            fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            # a framework's base may plant its own functions in the class (pydantic's
            # model_post_init): only convostore's are checked
            if inspect.isfunction(fn) and fn.__module__.startswith("convostore"):
                yield f"{cls.__name__}.{name}", fn


def signatures() -> Iterator[tuple[str, Callable[..., Any]]]:
    seen: set[int] = set()
    for module in MODULES:
        for name in public_names(module):
            obj = getattr(module, name, None)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isclass(obj) and obj.__module__.startswith("convostore"):
                for qualname, fn in _members(obj):
                    yield f"{module.__name__}.{qualname}", fn
            elif inspect.isfunction(obj) and obj.__module__.startswith("convostore"):
                yield f"{module.__name__}.{name}", obj


@functools.cache
def _type_checking_names(module_name: str) -> dict[str, Any]:
    """What a module imports under ``if TYPE_CHECKING:`` (its annotations may name them)."""
    module = sys.modules.get(module_name)
    if module is None or not module_name.startswith("convostore"):
        return {}
    path = module.__file__ or ""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    package = module_name if path.endswith("__init__.py") else module_name.rpartition(".")[0]
    names: dict[str, Any] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")):
            continue
        for imp in node.body:
            if isinstance(imp, ast.ImportFrom):
                base = package.split(".")
                base = base[: len(base) - (imp.level - 1)] if imp.level else []
                source = ".".join(base + ([imp.module] if imp.module else []))
                for alias in imp.names:
                    names[alias.asname or alias.name] = getattr(
                        importlib.import_module(source), alias.name)
    return names


def _namespace(fn: Callable[..., Any]) -> dict[str, Any]:
    return {**NAMESPACE, **_type_checking_names(fn.__module__), **fn.__globals__}


def _annotation_names(fn: Callable[..., Any]) -> Iterator[tuple[str, Any]]:
    """Each name an annotation of ``fn`` uses, with its value."""
    namespace = _namespace(fn)
    for text in fn.__annotations__.values():
        if not isinstance(text, str):
            continue
        for node in ast.walk(ast.parse(text, mode="eval")):
            if isinstance(node, ast.Name):
                if node.id in namespace:
                    yield node.id, namespace[node.id]
                elif not hasattr(builtins, node.id):
                    yield node.id, _UNRESOLVED


_UNRESOLVED = object()


def _classes_in(hint: Any) -> Iterator[type]:
    if inspect.isclass(hint):
        yield hint
    for arg in typing.get_args(hint):
        yield from _classes_in(arg)
    origin = typing.get_origin(hint)
    if inspect.isclass(origin):
        yield origin


def _defined_publicly(name: str, value: Any) -> bool:
    """Whether a public module defines ``name`` at its top level as ``value``."""
    return any(
        name in _top_level_names(m) and getattr(m, name, None) is value for m in MODULES
    )


def problems(where: str, fn: Callable[..., Any]) -> list[str]:
    found = []
    for name, value in _annotation_names(fn):
        if value is _UNRESOLVED:
            found.append(f"{where}: {name} cannot be resolved")
        elif id(value) in EXPORTED:
            continue
        elif inspect.isclass(value) or inspect.isfunction(value):
            if value.__module__.startswith("convostore") and _is_private(value.__module__):
                found.append(f"{where}: {name} ({value.__module__}) is private")
        elif (inspect.ismodule(value) or isinstance(value, typing.TypeVar)
              or _defined_publicly(name, value)):
            continue
        elif name in ALIAS_NAMES and name not in dir(typing):
            found.append(f"{where}: the alias {name} is not exported")
    try:
        hints = typing.get_type_hints(fn, localns=_namespace(fn))
    except Exception as exc:  # an annotation that does not evaluate is a problem too
        return [*found, f"{where}: annotations do not evaluate ({exc})"]
    for hint in hints.values():
        for cls in _classes_in(hint):
            module = getattr(cls, "__module__", "")
            if module.startswith("convostore") and _is_private(module) \
                    and id(cls) not in EXPORTED:
                found.append(f"{where}: {cls.__qualname__} ({module}) is private")
    return found


LEFT_TO_THEIR_OWNERS = {"MaybeAwaitable"}
"""Names still private in public signatures, in modules outside the store's faces: the context
providers' ``MaybeAwaitable`` (``convostore.context._providers``). Listed so the walk stays
green meanwhile; the test fails once one is fixed, so the list only shrinks."""


def test_public_signatures_name_only_public_types() -> None:
    walked = list(signatures())
    names = {w for w, _ in walked}
    assert {"convostore.Sessions.open", "convostore.AsyncSession.append_message",
            "convostore.manager.AsyncSessionManager.get_session"} <= names
    found = [p for where, fn in walked for p in problems(where, fn)]
    left = {name for name in LEFT_TO_THEIR_OWNERS if any(f" {name} " in p for p in found)}
    assert left == LEFT_TO_THEIR_OWNERS, "fixed: take it out of LEFT_TO_THEIR_OWNERS"
    found = [p for p in found if not any(f" {name} " in p for name in left)]
    assert not found, "\n".join(sorted(set(found)))


def _function(source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec("from __future__ import annotations\n" + source, namespace)
    fn: Callable[..., Any] = namespace["f"]
    return fn


def test_the_walk_catches_a_private_type_and_an_unexported_alias() -> None:
    """The checks above can fail: a private class and an unexported alias are reported."""
    private = _function(
        "from convostore.aio._worker import Worker\n"
        "from convostore.messages._history import History\n"
        "def f(worker: Worker) -> History: ...\n"
    )
    assert sorted(set(problems("f", private))) == [
        "f: History (convostore.messages._history) is private",
        "f: Worker (convostore.aio._worker) is private",
    ]
    alias = _function(
        "from convostore.search._index import Progress\n"
        "def f(progress: Progress) -> None: ...\n"
    )
    assert problems("f", alias) == ["f: the alias Progress is not exported"]
    public = _function(
        "from convostore import Moment, Session\n"
        "from convostore.store import StoreCore\n"
        "def f(core: StoreCore, when: Moment) -> Session: ...\n"
    )
    assert problems("f", public) == []


@pytest.mark.parametrize("name", ["Moment", "Duration", "Listener", "StoreCore", "Opening",
                                  "StoreOptions"])
def test_types_of_the_store_signatures_are_exported_and_documented(name: str) -> None:
    owners = [m for m in MODULES if name in getattr(m, "__all__", ())]
    assert owners, f"{name} is exported nowhere"
    obj = getattr(owners[0], name)
    if inspect.isclass(obj):
        assert obj.__doc__ and obj.__doc__ != type.__doc__
