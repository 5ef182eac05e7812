"""The public API as tools see it: exports stated for type checkers, async twins declared, not generated."""

from __future__ import annotations

import ast
import asyncio
import inspect
from pathlib import Path

import pytest

import agent_sessions
from agent_sessions import Session, SessionManager

PACKAGE = Path(agent_sessions.__file__).parent


def _type_checking_names() -> dict[str, str]:
    """Names imported in ``agent_sessions/__init__.py``'s ``if TYPE_CHECKING:`` block → module."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    return {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}


def test_every_export_is_stated_for_type_checkers_and_resolves():
    stated = _type_checking_names()
    assert sorted(stated) == agent_sessions.__all__
    assert stated == agent_sessions._EXPORTS
    for name in agent_sessions.__all__:
        value = getattr(agent_sessions, name)
        assert value is getattr(__import__(f"agent_sessions.{stated[name]}", fromlist=[name]), name)


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
