"""The public API as tools see it: exports listed once for type checkers and run time, async twins declared."""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agent_sessions
from agent_sessions import Session, SessionManager

PACKAGE = Path(agent_sessions.__file__).parent


def _type_checking_imports() -> list[ast.ImportFrom]:
    """The imports of ``agent_sessions/__init__.py``'s ``if TYPE_CHECKING:`` block: the one list of exports."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    assert all(isinstance(node, ast.ImportFrom) and node.level == 1 for node in block.body)
    return [node for node in block.body if isinstance(node, ast.ImportFrom)]


def test_every_export_is_an_explicit_reexport_and_resolves_to_its_modules_object():
    stated = {alias.name: node.module for node in _type_checking_imports() for alias in node.names}
    assert len(stated) == sum(len(node.names) for node in _type_checking_imports()), "a name is listed twice"
    # ``X as X`` is what type checkers read as exported when __all__ is not a literal they can see.
    assert all(alias.asname == alias.name for node in _type_checking_imports() for alias in node.names)
    assert agent_sessions.__all__ == sorted(stated)
    assert len(stated) > 50
    for name, module in stated.items():
        assert getattr(agent_sessions, name) is getattr(importlib.import_module(f"agent_sessions.{module}"), name)
    assert set(agent_sessions.__all__) <= set(dir(agent_sessions))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        agent_sessions.Nope  # noqa: B018


def test_star_import_gives_every_export():
    namespace: dict[str, object] = {}
    exec("from agent_sessions import *", namespace)
    assert sorted(set(namespace) - {"__builtins__"}) == agent_sessions.__all__


@pytest.mark.no_database
def test_importing_the_package_loads_no_submodule_and_no_django_app():
    """The names load on first use: a bare import needs no settings and leaves the app registry alone."""
    probe = (
        "import sys, agent_sessions\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('agent_sessions.'))\n"
        "assert not loaded, loaded\n"
        "assert 'django.apps' not in sys.modules or not __import__('django.apps').apps.apps.ready\n"
        "assert 'Session' in agent_sessions.__all__ and 'Session' in dir(agent_sessions)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=PACKAGE.parent, env=env)


def test_every_error_derives_from_the_base_and_is_exported():
    from agent_sessions import exceptions

    errors = [v for v in vars(exceptions).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert len(errors) == len(exceptions.__all__)
    for error in errors:
        assert issubclass(error, agent_sessions.AgentSessionsError), error
    assert agent_sessions.SessionNotFound is exceptions.SessionNotFound


def _declared_twins(cls: type) -> dict[str, str]:
    """``aname = async_twin(name)`` assignments in the class body: twin → sync method."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body
    twins = {}
    for node in body:
        call = node.value if isinstance(node, ast.Assign) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "async_twin":
            twins[node.targets[0].id] = call.args[0].id
    return twins


@pytest.mark.parametrize("cls", [Session, SessionManager])
def test_async_twins_are_declared_in_the_class_body_for_each_public_method(cls):
    twins = _declared_twins(cls)
    assert twins, cls
    for twin, method in twins.items():
        assert twin == f"a{method}"
        assert inspect.iscoroutinefunction(getattr(cls, twin)), twin
    builders = {"create", "for_session", "with_context", "with_cached_prompt", "on_compaction", "compact_after"}
    builders |= {"on_compaction_error", "with_searchable_history", "replay", "compact", "acompact"}
    builders |= {"model_call", "amodel_call"}  # a context manager and its async twin (SPEC §8)
    public = {
        name
        for name, value in vars(cls).items()
        if inspect.isfunction(value) and not name.startswith("_") and name not in twins and name not in builders
    }
    assert public <= set(twins.values()), public - set(twins.values())


def test_a_twin_runs_the_sync_method_and_follows_overrides():
    class Loud(Session):
        def get_path_length(self, leaf_id=None):
            return 42

    session = Loud.create().for_session("twins")
    assert asyncio.run(session.aget_path_length()) == 42
