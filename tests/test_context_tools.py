"""Context tools (set/load/unload/search_context), loaded-skill state and restore, SDK shapes."""

from __future__ import annotations

import asyncio

import pytest
from anthropic.types import ToolParam
from django.core.files.storage import FileSystemStorage
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from openai.types.chat import ChatCompletionToolParam
from pydantic import TypeAdapter

from agent_sessions import (
    DjangoSearchProvider,
    DjangoSessionProvider,
    Session,
    StaticProvider,
    StorageSkillProvider,
    Tool,
)
from agent_sessions.context.keys import entry_key, short_hash
from agent_sessions.models import ContextBlockRecord, SearchEntry
from tests.conftest import msg, tool_msg

pytestmark = pytest.mark.django_db


@pytest.fixture
def skills(tmp_path):
    provider = StorageSkillProvider(FileSystemStorage(location=str(tmp_path)), prefix="skills/")
    provider.set("api-ref", "# API reference\nGET /things", "HTTP endpoints")
    provider.set("guide", "# Guide")
    return provider


def build(session_id: str, skills=None, storage=None) -> Session:
    session = (
        Session.create(storage)
        .for_session(session_id)
        .with_context("soul", provider=StaticProvider("You are helpful."))
        .with_context("memory", description="Learned facts", max_tokens=100)
        .with_context("notes")
        .with_context("knowledge", description="Searchable knowledge base", provider=DjangoSearchProvider())
    )
    if skills is not None:
        session.with_context("skills", description="Docs", provider=skills)
    return session


def load_message(id: str, key: str, output: str, call_id: str | None = None) -> dict:
    return tool_msg(id, "load_context", call_id or f"call-{id}", {"label": "skills", "key": key}, output)


# ── which tools ─────────────────────────────────────────────────────
def test_tools_follow_block_kinds(session_id, skills):
    assert Session.create().for_session(session_id).with_context("s", provider=StaticProvider("x")).tools() == {}
    only_memory = Session.create().for_session(session_id).with_context("memory").tools()
    assert list(only_memory) == ["set_context"]
    tools = build(session_id, skills).tools()
    assert list(tools) == ["set_context", "load_context", "unload_context", "search_context"]
    assert all(isinstance(t, Tool) and t.name == name for name, t in tools.items())
    labels = tools["set_context"].parameters["properties"]["label"]["enum"]
    assert labels == ["memory", "notes", "knowledge", "skills"]  # keyed blocks with set() are writable too
    assert tools["load_context"].parameters["properties"]["label"]["enum"] == ["skills"]
    assert tools["search_context"].parameters["properties"]["label"]["enum"] == ["knowledge"]


def test_skill_provider_with_set_is_writable_through_set_context(session_id, skills):
    session = build(session_id, skills)
    assert session.get_context_block("skills").writable is True
    result = session.tools()["set_context"].execute(
        label="skills", content="How to deploy", metadata={"title": "Deploy Guide!", "description": "Deploying"}
    )
    assert result == 'Indexed "deploy-guide" in skills.'
    assert skills.load("deploy-guide") == "How to deploy"
    assert "- deploy-guide: Deploying" in session.get_context_block("skills").content


# ── set_context ─────────────────────────────────────────────────────
def test_set_context_results(session_id):
    set_context = build(session_id).tools()["set_context"]
    assert set_context.execute(label="memory", content="User likes coffee.") == (
        "Written to memory. Usage: 5% (5/100 tokens)"
    )
    assert set_context.execute(label="notes", content="abc def") == "Written to notes. Usage: 3 tokens"
    assert set_context.execute(label="notes", content="ghi", mode="append").startswith("Written to notes.")
    assert ContextBlockRecord.objects.get(label=f"notes_{session_id}").content == "abc def\nghi"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"label": "nope", "content": "x"}, '"nope" is not a writable block'),
        ({"label": "soul", "content": "x"}, '"soul" is not a writable block'),
        ({"label": "memory"}, "missing required argument 'content'"),
        ({"content": "x"}, "missing required argument 'label'"),
        ({"label": "memory", "content": 5}, "argument 'content' must be of type string"),
        ({"label": "memory", "content": "word " * 200}, "allows 100 tokens"),
        ({"label": "memory", "content": "x", "mode": "sideways"}, "mode must be"),
    ],
)
def test_set_context_errors_are_strings(session_id, arguments, fragment):
    session = build(session_id)
    session.replace_context_block("memory", "kept")
    result = session.tools()["set_context"].execute(**arguments)
    assert result.startswith("Error:")
    assert fragment in result
    assert session.get_context_block("memory").content == "kept"


def test_provider_failure_is_an_error_string(session_id):
    class BrokenMemory:
        def get(self):
            return ""

        def set(self, content):
            raise OSError("disk on fire")

    class BrokenIndex:
        def get(self):
            return ""

        def search(self, query):
            raise RuntimeError("index offline")

        def set(self, key, content):
            raise RuntimeError("index read-only today")

    session = (
        Session.create()
        .for_session(session_id)
        .with_context("b", provider=BrokenMemory())
        .with_context("i", provider=BrokenIndex())
    )
    tools = session.tools()
    assert tools["set_context"].execute(label="b", content="x") == "Error: disk on fire"
    assert tools["set_context"].execute(label="i", content="x") == "Error: index read-only today"
    assert tools["search_context"].execute(label="i", query="x") == "Error: index offline"


def test_keyed_writes_use_title_slug_or_content_hash(session_id):
    set_context = build(session_id).tools()["set_context"]
    assert set_context.execute(label="knowledge", content="Fridays.", metadata={"title": "Deploy day"}) == (
        'Indexed "deploy-day" in knowledge.'
    )
    set_context.execute(label="knowledge", content="Thursdays now.", metadata={"title": "Deploy  DAY"})
    assert list(SearchEntry.objects.filter(label="knowledge").values_list("key", "content")) == [
        ("deploy-day", "Thursdays now.")
    ]
    text = "Café opens at 9"
    assert set_context.execute(label="knowledge", content=text) == (
        f'Indexed "caf-opens-at-9-{short_hash(text)}" in knowledge.'
    )


def test_non_latin_texts_never_collide(session_id):
    set_context = build(session_id).tools()["set_context"]
    first = set_context.execute(label="knowledge", content="東京は日本の首都です")
    second = set_context.execute(label="knowledge", content="大阪は食の都です")
    assert first != second
    assert first.startswith('Indexed "entry-')
    assert second.startswith('Indexed "entry-')
    assert SearchEntry.objects.filter(label="knowledge").count() == 2
    titled = set_context.execute(label="knowledge", content="x", metadata={"title": "日本語のタイトル"})
    assert titled == f'Indexed "entry-{short_hash("日本語のタイトル")}" in knowledge.'


def test_entry_key_rules():
    long_title = "A" * 70 + " tail"
    assert entry_key("ignored", long_title) == "a" * 60
    assert entry_key("Hello, World! 42", None) == f"hello-world-42-{short_hash('Hello, World! 42')}"
    assert entry_key("…", "   ") == f"entry-{short_hash('…')}"


# ── search_context ──────────────────────────────────────────────────
def test_search_context_formats_results(session_id):
    session = build(session_id)
    session.set_context_entry("knowledge", "We deploy on Fridays.", title="deploy")
    session.set_context_entry("knowledge", "Lunch is at noon.", title="lunch")
    search = session.tools()["search_context"]
    assert search.execute(label="knowledge", query="deploy Fridays") == "[deploy]\nWe deploy on Fridays."
    assert search.execute(label="knowledge", query="unicorns") == "No results found."
    assert search.execute(label="knowledge", query="") == "No results found."
    assert search.execute(label="memory", query="x").startswith("Error:")
    assert search.execute(label="knowledge").startswith("Error: missing required argument 'query'")


def test_search_context_accepts_other_result_shapes(session_id):
    class Custom:
        def __init__(self, results):
            self.results = results

        def get(self):
            return ""

        def search(self, query):
            return self.results

    session = (
        Session.create()
        .for_session(session_id)
        .with_context("a", provider=Custom([("k1", "one"), {"key": "k2", "content": "two"}]))
        .with_context("b", provider=Custom("plain text answer"))
        .with_context("c", provider=Custom(None))
    )
    search = session.tools()["search_context"]
    assert search.execute(label="a", query="q") == "[k1]\none\n\n[k2]\ntwo"
    assert search.execute(label="b", query="q") == "plain text answer"
    assert search.execute(label="c", query="q") == "No results found."


# ── load / unload ───────────────────────────────────────────────────
def test_load_context_returns_document_and_records_it(session_id, skills):
    session = build(session_id, skills)
    load = session.tools()["load_context"]
    assert load.execute(label="skills", key="api-ref") == "# API reference\nGET /things"
    assert load.execute(label="skills", key="missing") == "Not found: missing"
    assert load.execute(label="memory", key="x") == 'Error: Block "memory" is not a skill block'
    assert load.execute(label="nope", key="x").startswith("Error: Unknown context block")
    assert session.get_loaded_skill_keys() == {"skills:api-ref"}


def test_unload_rewrites_history_and_reports(session_id, skills):
    session = build(session_id, skills)
    tools = session.tools()
    session.append_message(msg("u1", text="read the api docs"))
    document = tools["load_context"].execute(label="skills", key="api-ref")
    session.append_message(load_message("a1", "api-ref", document))
    session.append_message(msg("u2", text="thanks"))
    assert tools["unload_context"].execute(label="skills", key="api-ref") == (
        'Unloaded "api-ref" from skills. Context reclaimed.'
    )
    part = session.get_message("a1")["parts"][0]
    assert part["output"] == "[skill unloaded: api-ref]"
    assert part["input"] == {"label": "skills", "key": "api-ref"}
    assert session.get_loaded_skill_keys() == set()
    assert tools["unload_context"].execute(label="skills", key="api-ref") == (
        'Skill "api-ref" is not currently loaded in "skills".'
    )
    assert tools["unload_context"].execute(label="nope", key="x").startswith("Error:")
    assert tools["unload_context"].execute(label="skills").startswith("Error: missing required argument 'key'")


def test_unload_before_the_result_reaches_history(session_id, skills):
    session = build(session_id, skills)
    session.load_skill("skills", "guide")
    assert session.unload_skill("skills", "guide") is True
    assert session.get_loaded_skill_keys() == set()


def test_unload_rewrites_every_shape_of_tool_part(session_id, skills):
    session = build(session_id, skills)
    session.append_message(
        {
            "id": "v5dyn",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "loading"},
                {
                    "type": "dynamic-tool",
                    "toolName": "load_context",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"label": "skills", "key": "guide"},
                    "output": "# Guide",
                },
            ],
        }
    )
    session.append_message(
        {
            "id": "v4",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-invocation",
                    "toolInvocation": {
                        "toolName": "load_context",
                        "toolCallId": "c2",
                        "state": "result",
                        "args": {"label": "skills", "key": "guide"},
                        "result": "# Guide",
                    },
                }
            ],
        }
    )
    assert session.get_loaded_skill_keys() == {"skills:guide"}
    assert session.unload_skill("skills", "guide") is True
    assert session.get_message("v5dyn")["parts"][1]["output"] == "[skill unloaded: guide]"
    assert session.get_message("v5dyn")["parts"][0] == {"type": "text", "text": "loading"}
    assert session.get_message("v4")["parts"][0]["toolInvocation"]["result"] == "[skill unloaded: guide]"


# ── restore after a restart ─────────────────────────────────────────
def test_loaded_skills_restored_after_restart(session_id, skills):
    session = build(session_id, skills)
    session.append_message(load_message("a1", "api-ref", "# API reference"))
    session.append_message(load_message("a2", "guide", "# Guide"))
    session.append_message(load_message("a3", "missing", "Not found: missing"))
    restarted = build(session_id, skills)
    assert restarted.get_loaded_skill_keys() == {"skills:api-ref", "skills:guide"}
    assert restarted.tools()["unload_context"].execute(label="skills", key="guide").startswith("Unloaded")
    assert build(session_id, skills).get_loaded_skill_keys() == {"skills:api-ref"}


def test_no_skill_block_means_no_transcript_read(session_id):
    session = build(session_id)
    for i in range(5):
        session.append_message(msg(f"m{i}"))
    restarted = build(session_id)
    restarted.get_context_blocks()
    with CaptureQueriesContext(connection) as queries:
        assert restarted.get_loaded_skill_keys() == set()
    assert len(queries) == 0


class Spy:
    """A custom SessionProvider over the ORM that records reads and refuses whole-history loads."""

    def __init__(self, session_id):
        self.inner = DjangoSessionProvider(session_id)
        self.windows: list[int] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get_history(self, leaf_id=None):
        raise AssertionError("the whole transcript was read")

    def get_recent_history(self, leaf_id=None, *, max_content_bytes, min_recent_messages=1):
        result = self.inner.get_recent_history(
            leaf_id, max_content_bytes=max_content_bytes, min_recent_messages=min_recent_messages
        )
        self.windows.append(result.total_content_bytes)
        return result


def test_restore_scans_in_bounded_windows(session_id, skills):
    writer = build(session_id, skills)
    writer.append_message(load_message("first", "guide", "# Guide"))
    for i in range(40):
        writer.append_message(msg(f"m{i}", text="filler " * 10))
    writer.append_message(load_message("last", "api-ref", "# API reference"))
    spy = Spy(session_id)
    with override_settings(AGENT_SESSIONS_SKILL_SCAN_WINDOW_BYTES=600):
        restarted = build(session_id, skills, storage=spy)
        assert restarted.get_loaded_skill_keys() == {"skills:guide", "skills:api-ref"}
        assert len(spy.windows) > 5
        assert max(spy.windows) <= 600
        spy.windows.clear()
        assert restarted.unload_skill("skills", "guide") is True
        assert len(spy.windows) > 5
    assert writer.get_message("first")["parts"][0]["output"] == "[skill unloaded: guide]"
    assert writer.get_message("last")["parts"][0]["output"] == "# API reference"


def test_loads_inside_a_compacted_range_are_not_restored(session_id, skills):
    session = build(session_id, skills)
    session.append_message(msg("u0"))
    session.append_message(load_message("a1", "guide", "# Guide"))
    session.append_message(msg("u2"))
    session.append_message(load_message("a3", "api-ref", "# API reference"))
    session.add_compaction("summary", "a1", "u2")
    assert build(session_id, skills).get_loaded_skill_keys() == {"skills:api-ref"}


def test_loads_on_another_branch_are_not_restored(session_id, skills):
    session = build(session_id, skills)
    session.append_message(msg("root"))
    session.append_message(load_message("a1", "guide", "# Guide"), "root")
    session.append_message(msg("b1"), "root")  # latest leaf is on the other branch
    assert build(session_id, skills).get_loaded_skill_keys() == set()


def test_clear_messages_forgets_loaded_skills(session_id, skills):
    session = build(session_id, skills)
    session.tools()["load_context"].execute(label="skills", key="guide")
    session.append_message(load_message("a1", "guide", "# Guide"))
    assert session.get_loaded_skill_keys() == {"skills:guide"}
    session.clear_messages()
    assert session.get_loaded_skill_keys() == set()
    assert build(session_id, skills).get_loaded_skill_keys() == set()


# ── SDK shapes and async ────────────────────────────────────────────
def test_tool_definitions_validate_against_the_official_sdk_types(session_id, skills):
    openai_adapter = TypeAdapter(ChatCompletionToolParam)
    anthropic_adapter = TypeAdapter(ToolParam)
    tools = build(session_id, skills).tools()
    assert len(tools) == 4
    for tool in tools.values():
        as_openai, as_anthropic = tool.to_openai(), tool.to_anthropic()
        assert openai_adapter.validate_python(as_openai) == as_openai
        assert anthropic_adapter.validate_python(as_anthropic) == as_anthropic
        assert as_openai["function"]["parameters"]["type"] == "object"
        assert set(as_openai["function"]["parameters"]["required"]) <= set(
            as_openai["function"]["parameters"]["properties"]
        )
        assert as_anthropic["input_schema"] is tool.parameters
        assert as_anthropic["description"] == tool.description


# Async twins run in Django's sync thread, which has its own connection.
@pytest.mark.django_db(transaction=True)
def test_aexecute_and_async_twins(session_id, skills):
    session = build(session_id, skills)

    async def run():
        tools = await session.atools()
        written = await tools["set_context"].aexecute(label="memory", content="async fact")
        bad = await tools["set_context"].aexecute(label="nope", content="x")
        loaded = await tools["load_context"].aexecute(label="skills", key="guide")
        keys = await session.aget_loaded_skill_keys()
        unloaded = await session.aunload_skill("skills", "guide")
        return written, bad, loaded, keys, unloaded

    written, bad, loaded, keys, unloaded = asyncio.run(run())
    assert written.startswith("Written to memory.")
    assert bad.startswith("Error:")
    assert loaded == "# Guide"
    assert keys == {"skills:guide"}
    assert unloaded is True


def test_tool_with_async_function():
    async def shout(text: str) -> str:
        return text.upper()

    tool = Tool(
        "shout", "Shout", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}, shout
    )
    assert tool.execute(text="hi") == "HI"
    assert asyncio.run(tool.aexecute(text="hi")) == "HI"
    assert tool.execute() == "Error: missing required argument 'text'; valid: text"
    assert tool.execute(text="hi", extra="no") == "Error: unknown argument 'extra'; valid: text"
