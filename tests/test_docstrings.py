"""Every public class and function of the library says what it is and what its arguments mean.

The walk covers every module of the installed library: ``raytuner`` and its
subpackages, ``raytuner.searchers`` and ``raytuner.schedulers``; and the
benchmarks (``benchmarks``, at the repository's root, not installed); the generated gRPC stubs (``raytuner.protocol.v1``)
and ``__main__`` modules (importing one runs it) are left out. A module is
checked for a module docstring; its public classes and functions (defined in
that module, named without a leading underscore and, where the module has an
``__all__``, listed in it) for a docstring; and every function or method that
takes arguments besides ``self``/``cls`` for a Google-style ``Args:`` section
naming each of them (``*args``/``**kwargs`` need no entry).

What is not asked for:

- dunder methods, ``__init__`` aside, whose arguments may equally be
  documented in the class docstring (or, for arguments passed on to a base
  class of raytuner, in the base's);
- a method that overrides one of a base class from outside raytuner (Ray
  Tune's ``Searcher``, ``abc``, pydantic, ...): the base documents it;
- an override without a docstring of its own, when the base method inside
  raytuner is documented (``inspect.getdoc`` shows the base's text); an
  override with one may leave its arguments to the base method's ``Args:``;
- click commands, which document their options in ``--help``;
- ``Args:`` for the generated ``__init__`` of a dataclass, a named tuple or a
  pydantic model (their fields are described in the class docstring or by
  ``Field(description=...)``).

Every offender is listed in one assertion message, grouped by file.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from pydantic import BaseModel

PACKAGES = ("raytuner", "raytuner.searchers", "raytuner.schedulers", "benchmarks")
LEFT_OUT = ("raytuner.protocol.v1",)
ARGS_HEADER = re.compile(r"^(?P<indent>[ \t]*)Args:[ \t]*$", re.MULTILINE)
ARG_LINE = re.compile(r"^[ \t]*\*{0,2}(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*(\([^)]*\))?[ \t]*:", re.MULTILINE)


def _modules() -> Iterator[ModuleType]:
    """Every module of the library, imported, each once."""
    seen: set[str] = set()
    for name in PACKAGES:
        package = importlib.import_module(name)
        candidates = [name] + [info.name for info in pkgutil.walk_packages(package.__path__, name + ".")]
        for module_name in candidates:
            if module_name in seen or module_name.split(".")[-1] == "__main__":
                continue
            if any(module_name == skip or module_name.startswith(skip + ".") for skip in LEFT_OUT):
                continue
            seen.add(module_name)
            yield importlib.import_module(module_name)


def _public_members(module: ModuleType) -> Iterator[tuple[str, Any]]:
    """The public classes and functions defined in ``module``."""
    names = getattr(module, "__all__", None)
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or (names is not None and name not in names):
            continue
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue  # click commands (click.Command objects) land here too
        if getattr(value, "__module__", None) != module.__name__:
            continue  # imported: checked where it is defined
        yield name, value


def _documented_arguments(doc: str) -> set[str] | None:
    """The names listed under the docstring's ``Args:`` header, or None without one."""
    match = ARGS_HEADER.search(doc)
    if match is None:
        return None
    indent = len(match.group("indent").expandtabs())
    names: set[str] = set()
    body = doc[match.end() :].splitlines()[1:]
    entry_indent: int | None = None
    for line in body:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if width <= indent:
            break  # the next section (or the end of the docstring's body)
        if entry_indent is None:
            entry_indent = width
        if width == entry_indent:
            found = ARG_LINE.match(line)
            if found:
                names.add(found.group("name"))
    return names


def _parameters(function: Callable[..., Any]) -> list[str]:
    """The named parameters of ``function`` that need documenting."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in signature.parameters.values()
        if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _argument_problem(function: Callable[..., Any], docs: list[str]) -> str | None:
    """What is missing from the ``Args:`` sections in ``docs`` for ``function``'s parameters."""
    needed = _parameters(function)
    if not needed:
        return None
    sections = [found for found in (_documented_arguments(doc) for doc in docs if doc) if found is not None]
    if not sections:
        return "no Args: section"
    missing = [name for name in needed if not any(name in section for section in sections)]
    return f"Args: lacks {', '.join(missing)}" if missing else None


def _generated_init(cls: type) -> bool:
    """True where ``__init__`` is written by a dataclass, a named tuple or pydantic."""
    return (
        dataclasses.is_dataclass(cls)
        or issubclass(cls, BaseModel)
        or (issubclass(cls, tuple) and hasattr(cls, "_fields"))
    )


def _base_method(cls: type, name: str) -> Any:
    """The attribute ``name`` of the nearest base class that defines it, or None."""
    for base in cls.__mro__[1:]:
        if name in vars(base):
            return vars(base)[name]
    return None


def _unwrap(member: Any) -> Callable[..., Any] | None:
    """The plain function behind a method, static method or class method; None for anything else."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    return member if inspect.isfunction(member) else None


def _class_problems(cls: type) -> Iterator[tuple[int, str, str]]:
    """``(line, name, problem)`` for the class and each of its public methods."""
    class_doc = inspect.cleandoc(cls.__doc__ or "")
    if not cls.__doc__:
        yield inspect.getsourcelines(cls)[1], cls.__qualname__, "no docstring"
    for name, member in vars(cls).items():
        function = _unwrap(member)
        if function is None or (name.startswith("_") and name != "__init__"):
            continue
        if function.__qualname__.split(".")[0] != cls.__qualname__.split(".")[0]:
            continue  # assigned from elsewhere
        own_doc = inspect.cleandoc(function.__doc__ or "")
        qualified = f"{cls.__qualname__}.{name}"
        line = function.__code__.co_firstlineno
        if name == "__init__":
            if _generated_init(cls):
                continue
            base_docs = [
                inspect.cleandoc(base.__doc__ or "")
                for base in cls.__mro__[1:]
                if base.__module__.startswith("raytuner")
            ]  # a subclass may lean on its base's Args
            problem = _argument_problem(function, [class_doc, own_doc, *base_docs])
            if problem:
                yield line, qualified, problem
            continue
        base = _base_method(cls, name)
        if base is not None:
            base_module = getattr(_unwrap(base) or base, "__module__", "") or ""
            if not base_module.startswith("raytuner"):
                continue  # Ray, abc, pydantic, the standard library document it
            if not function.__doc__ and getattr(_unwrap(base) or base, "__doc__", None):
                continue  # inherits the documented contract
        if not function.__doc__:
            yield line, qualified, "no docstring"
            continue
        base_doc = inspect.cleandoc(getattr(_unwrap(base) or base, "__doc__", None) or "") if base is not None else ""
        problem = _argument_problem(function, [own_doc, base_doc])  # an override may lean on its base's Args
        if problem:
            yield line, qualified, problem


def _offenders() -> dict[str, list[str]]:
    """Every problem found, keyed by source file."""
    problems: dict[str, list[str]] = defaultdict(list)
    for module in _modules():
        path = inspect.getsourcefile(module) or module.__name__
        if not module.__doc__:
            problems[path].append(f"module {module.__name__}: no docstring")
        for name, value in _public_members(module):
            line = inspect.getsourcelines(value)[1]
            if inspect.isclass(value):
                for method_line, qualified, problem in _class_problems(value):
                    problems[path].append(f"line {method_line} {qualified}: {problem}")
            elif not value.__doc__:
                problems[path].append(f"line {line} {name}: no docstring")
            else:
                found = _argument_problem(value, [inspect.cleandoc(value.__doc__)])
                if found:
                    problems[path].append(f"line {line} {name}: {found}")
    return problems


def test_args_sections_are_read() -> None:
    doc = inspect.cleandoc("""Do it.

        Args:
            store: where records go.
            *names (str): more.
            timeout (float): seconds;
                continued here: not an argument.

        Returns:
            nothing: at all.
        """)
    assert _documented_arguments(doc) == {"store", "names", "timeout"}
    assert _documented_arguments("Do it.\n\nReturns:\n    x: y.") is None


def test_the_walk_covers_the_library() -> None:
    names = {module.__name__ for module in _modules()}
    for expected in (
        "raytuner.session.tuning_session",
        "raytuner.searchers.lcm_searcher",
        "raytuner.schedulers.gptuneband",
        "raytuner.client.remote",
        "raytuner.cli.main",
        "raytuner.test_problems",
        "benchmarks.store",
    ):
        assert expected in names
    assert not any(name.startswith("raytuner.protocol.v1") for name in names)


def test_every_public_class_and_function_is_documented() -> None:
    problems = _offenders()
    report = "\n".join(
        f"{path}:\n" + "\n".join(f"    {line}" for line in lines) for path, lines in sorted(problems.items())
    )
    count = sum(len(lines) for lines in problems.values())
    assert not problems, f"{count} public names lack documentation:\n{report}"
