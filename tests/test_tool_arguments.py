"""Every tool refuses arguments it does not know, is missing, or gets in the wrong type, and writes nothing.

In particular ``set_context(label=..., content=..., action="append")`` must append: dropping
``action`` would replace the block and lose its old content.
"""

from __future__ import annotations

import asyncio

import pytest
from django.core.files.storage import FileSystemStorage

from agent_sessions import DjangoSearchProvider, Session, SessionManager, StorageSkillProvider
from agent_sessions.models import ContextBlockRecord, SearchEntry
from tests.conftest import msg

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session(session_id, tmp_path):
    skills = StorageSkillProvider(FileSystemStorage(location=str(tmp_path)), prefix="skills/")
    skills.set("guide", "# Guide")
    session = (
        Session.create()
        .for_session(session_id)
        .with_context("memory", description="Learned facts", max_tokens=100)
        .with_context("knowledge", provider=DjangoSearchProvider())
        .with_context("skills", provider=skills)
    )
    session.replace_context_block("memory", "User likes coffee.")
    return session


def snapshot(session_id):
    blocks = sorted(ContextBlockRecord.objects.values_list("label", "content"))
    entries = sorted(SearchEntry.objects.values_list("label", "key", "content"))
    return blocks, entries


def run(tool, use_async, **arguments):
    return asyncio.run(tool.aexecute(**arguments)) if use_async else tool.execute(**arguments)


@pytest.mark.parametrize("use_async", [False, True], ids=["execute", "aexecute"])
def test_set_context_with_an_unknown_argument_keeps_the_memory(session, session_id, use_async):
    before = snapshot(session_id)
    result = run(session.tools()["set_context"], use_async, label="memory", content="new", action="append")
    assert result == "Error: unknown argument 'action'; valid: label, content, mode, metadata"
    assert session.get_context_block("memory").content == "User likes coffee."
    assert snapshot(session_id) == before


CASES = [
    ("set_context", {"label": "knowledge", "content": "x", "tags": ["a"]}, "unknown argument 'tags'"),
    ("set_context", {"label": "memory", "text": "x"}, "unknown argument 'text'; missing required argument 'content'"),
    ("set_context", {"label": "memory", "content": ["x"]}, "argument 'content' must be of type string, not array"),
    ("set_context", {"label": "knowledge", "content": "x", "metadata": {"title": 3}}, "'metadata.title' must be"),
    ("load_context", {"label": "skills", "key": "guide", "version": 2}, "unknown argument 'version'"),
    ("load_context", {"label": "skills"}, "missing required argument 'key'"),
    ("unload_context", {"label": "skills", "key": "guide", "force": True}, "unknown argument 'force'"),
    ("unload_context", {"label": "skills", "key": 7}, "argument 'key' must be of type string, not integer"),
    ("search_context", {"label": "knowledge", "query": "x", "limit": 3}, "unknown argument 'limit'"),
    ("search_context", {}, "missing required arguments 'label', 'query'"),
]


@pytest.mark.parametrize("use_async", [False, True], ids=["execute", "aexecute"])
@pytest.mark.parametrize(("name", "arguments", "fragment"), CASES)
def test_context_tools_name_the_problem_and_write_nothing(session, session_id, name, arguments, fragment, use_async):
    tool = session.tools()[name]
    before = snapshot(session_id)
    result = run(tool, use_async, **arguments)
    assert result.startswith("Error: ")
    assert fragment in result
    assert result.endswith("valid: " + ", ".join(tool.parameters["properties"])) or "must be" in result
    assert snapshot(session_id) == before
    assert session.get_loaded_skill_keys() == set()


@pytest.mark.parametrize("use_async", [False, True], ids=["execute", "aexecute"])
def test_session_search_refuses_unknown_arguments(use_async):
    manager = SessionManager()
    sid = manager.create("s").id
    manager.append(sid, msg("a", text="kiwi note"))
    tool = manager.tools()["session_search"]
    assert run(tool, use_async, query="kiwi") == "[user] kiwi note"
    assert run(tool, use_async, query="kiwi", limit=3) == "Error: unknown argument 'limit'; valid: query"
    assert run(tool, use_async, q="kiwi").startswith("Error: unknown argument 'q'; missing required argument 'query'")
    assert run(tool, use_async, query=5) == "Error: argument 'query' must be of type string, not integer"


def test_an_argument_named_self_is_just_unknown(session):
    assert (
        session.tools()["set_context"]
        .execute(self=1, label="memory", content="x")
        .startswith("Error: unknown argument 'self'")
    )


def test_json_api_tool_route_reports_unknown_arguments(api, custom_config):
    sid = api.new_session()
    url = f"/sessions/{sid}/tools/set_context"
    assert api.post(url, {"arguments": {"label": "memory", "content": "kept"}}).json()["result"].startswith("Written")
    bad = api.post(url, {"arguments": {"label": "memory", "content": "lost?", "action": "append"}})
    assert bad.status_code == 200
    assert bad.json()["result"] == "Error: unknown argument 'action'; valid: label, content, mode, metadata"
    assert api.get(f"/sessions/{sid}/context/memory").json()["content"] == "kept"
    search = api.post(f"/sessions/{sid}/tools/session_search", {"arguments": {"query": "x", "self": 1}}).json()
    assert search["result"] == "Error: unknown argument 'self'; valid: query"
