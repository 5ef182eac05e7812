"""LangChain adapter: lossless chat history (sync and async), RunnableWithMessageHistory, search/admin/fork/compact."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from agent_sessions import InvalidMessage, Session, SessionManager
from agent_sessions.integrations.langchain import (
    _REBUILT,
    MESSAGE_KIND,
    DjangoChatMessageHistory,
    _as_dumped,
    from_langchain,
    rebuild,
    to_langchain,
)
from agent_sessions.models import Message, SessionRecord

BASE = "/admin/agent_sessions"


def conversation() -> list:
    return [
        SystemMessage(content="You are a weather bot.", id="sys-1"),
        HumanMessage(content="Weather in Kyoto?", id="h-1", additional_kwargs={"lang": "en"}),
        AIMessage(
            content=[{"type": "text", "text": "Let me check."}, {"type": "reasoning", "reasoning": "Need the tool."}],
            tool_calls=[{"name": "get_weather", "args": {"city": "Kyoto"}, "id": "call_1", "type": "tool_call"}],
            additional_kwargs={"refusal": None, "custom": [1, 2.5, "é"]},
            response_metadata={"model_name": "fake-1", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            id="run-1",
        ),
        ToolMessage(content="rain, 18 °C", tool_call_id="call_1", artifact={"raw": {"t": 18}}, id="t-1"),
        AIMessage(content="It rains in Kyoto: take an umbrella.", id="run-2", response_metadata={"stop": True}),
        HumanMessage(content="And Osaka?"),
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Osaka"}, "id": "call_2"}]),
        ToolMessage(content="service down", tool_call_id="call_2", status="error"),
        AIMessage(content="Sorry, the forecast service is down."),
    ]


@pytest.mark.django_db
def test_round_trip_is_lossless_with_tool_calls():
    history = DjangoChatMessageHistory("lc-1")
    history.add_messages(conversation())
    again = DjangoChatMessageHistory("lc-1").messages
    assert again == conversation()
    assert [type(m) for m in again] == [type(m) for m in conversation()]
    assert again[2].tool_calls[0]["args"] == {"city": "Kyoto"}
    assert again[3].artifact == {"raw": {"t": 18}}
    assert again[2].usage_metadata["total_tokens"] == 15
    assert again[7].status == "error"
    assert SessionRecord.objects.get(id="lc-1").source == "langchain"


@pytest.mark.django_db
def test_rows_are_rendered_as_ui_messages():
    DjangoChatMessageHistory("lc-2").add_messages(conversation())
    rows = Session.create().for_session("lc-2").get_history()
    assert [r["role"] for r in rows] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert rows[2]["parts"][:3] == [
        {"type": "text", "text": "Let me check."},
        {"type": "reasoning", "text": "Need the tool."},
        {
            "type": "tool-get_weather",
            "toolCallId": "call_1",
            "toolName": "get_weather",
            "state": "input-available",
            "input": {"city": "Kyoto"},
        },
    ]
    assert rows[3]["parts"][0] == {
        "type": "tool-get_weather",
        "toolCallId": "call_1",
        "toolName": "get_weather",
        "state": "output-available",
        "output": "rain, 18 °C",
    }
    assert rows[7]["parts"][0]["state"] == "output-error"
    assert rows[7]["parts"][0]["errorText"] == "service down"
    assert all(r["parts"][-1]["type"] == f"data-{MESSAGE_KIND}" for r in rows)


@pytest.mark.django_db
def test_single_adds_chunks_chat_messages_and_clear():
    history = DjangoChatMessageHistory("lc-3")
    history.add_user_message("hi")
    history.add_ai_message("hello")
    history.add_message(AIMessageChunk(content="streamed", id="chunk-1"))
    history.add_message(ChatMessage(role="critic", content="meh"))
    messages = history.messages
    assert [m.content for m in messages] == ["hi", "hello", "streamed", "meh"]
    assert isinstance(messages[2], AIMessageChunk)
    assert messages[3].role == "critic"
    assert Session.create().for_session("lc-3").get_history()[3]["role"] == "critic"
    history.clear()
    assert history.messages == []
    assert not Message.objects.filter(session_id="lc-3").exists()


@pytest.mark.django_db
def test_a_tool_result_added_later_is_named_after_its_call():
    history = DjangoChatMessageHistory("lc-4")
    history.add_messages(conversation()[:3])
    history.add_message(ToolMessage(content="rain", tool_call_id="call_1"))
    row = Session.create().for_session("lc-4").get_latest_leaf()
    assert row["parts"][0]["type"] == "tool-get_weather"


@pytest.mark.django_db
def test_bad_input_writes_nothing():
    history = DjangoChatMessageHistory("lc-bad")
    with pytest.raises(TypeError):
        history.add_messages([HumanMessage(content="ok"), {"role": "user", "content": "dict"}])
    with pytest.raises(InvalidMessage):
        history.add_messages(
            [HumanMessage(content="ok"), HumanMessage(content="x", additional_kwargs={"n": float("nan")})]
        )
    assert history.messages == []


@pytest.mark.django_db(transaction=True)
def test_async_twins():
    history = DjangoChatMessageHistory("lc-async")

    async def go():
        await history.aadd_messages(conversation())
        read = await history.aget_messages()
        await history.aclear()
        return read, await history.aget_messages()

    read, after = asyncio.run(go())
    assert read == conversation()
    assert after == []


@pytest.mark.django_db(transaction=True)  # langchain may save from a callback thread
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_runnable_with_message_history():
    seen: list[list] = []
    model = GenericFakeChatModel(
        messages=iter([AIMessage(content="Kyoto: rain.", id="r1"), AIMessage(content="Osaka: sun.", id="r2")])
    )
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Weather bot."), MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def record(value):
        seen.append(value.to_messages())
        return value

    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(record) | model,
        lambda session_id: DjangoChatMessageHistory(session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "lc-runnable"}}
    assert chain.invoke({"question": "Kyoto?"}, config=config).content == "Kyoto: rain."
    assert chain.invoke({"question": "Osaka?"}, config=config).content == "Osaka: sun."
    # The second call saw the first turn, read back from the database.
    assert [m.content for m in seen[1]] == ["Weather bot.", "Kyoto?", "Kyoto: rain.", "Osaka?"]
    stored = DjangoChatMessageHistory("lc-runnable").messages
    assert [m.content for m in stored] == ["Kyoto?", "Kyoto: rain.", "Osaka?", "Osaka: sun."]
    assert stored[1].id == "r1"


@pytest.mark.django_db
def test_search_admin_fork_and_compaction(admin_client):
    history = DjangoChatMessageHistory("lc-5")
    history.add_messages(conversation())
    session = Session.create().for_session("lc-5")
    assert [r.role for r in session.search("umbrella")] == ["assistant"]

    html = admin_client.get(f"{BASE}/sessionrecord/lc-5/change/").content.decode()
    assert "get_weather" in html
    assert "take an umbrella" in html
    assert "service down" in html

    rows = session.get_history()
    manager = SessionManager()
    fork = manager.fork("lc-5", rows[4]["id"], "fork")
    assert DjangoChatMessageHistory(fork.id).messages == conversation()[:5]

    overlay = manager.add_compaction("lc-5", "Kyoto: rain, umbrella.", rows[1]["id"], rows[4]["id"])
    compacted = history.messages
    assert compacted[0] == conversation()[0]
    assert compacted[1] == AIMessage(content="Kyoto: rain, umbrella.", id=f"compaction_{overlay.id}")
    assert compacted[2:] == conversation()[5:]


def test_foreign_rows_become_langchain_messages():
    row = {
        "id": "u9",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Looking."},
            {
                "type": "tool-lookup",
                "toolCallId": "c9",
                "state": "output-available",
                "input": {"q": 1},
                "output": {"a": 2},
            },
            {
                "type": "dynamic-tool",
                "toolName": "t",
                "toolCallId": "c1",
                "state": "output-error",
                "input": "raw",
                "errorText": "boom",
            },
        ],
    }
    ai, ok, failed = to_langchain(row)
    assert ai == AIMessage(
        content="Looking.",
        id="u9",
        tool_calls=[
            {"name": "lookup", "args": {"q": 1}, "id": "c9", "type": "tool_call"},
            {"name": "t", "args": {"input": "raw"}, "id": "c1", "type": "tool_call"},
        ],
    )
    assert ok == ToolMessage(content='{"a": 2}', tool_call_id="c9", name="lookup")
    assert failed.status == "error"
    assert failed.content == "boom"
    assert to_langchain({"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}) == [
        HumanMessage(content="hi", id="u")
    ]
    assert from_langchain(HumanMessage(content="x"))["role"] == "user"


def test_import_without_langchain_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.delitem(sys.modules, "agent_sessions.integrations.langchain")
    with pytest.raises(ImportError, match=r"pip install django-agent-sessions\[langchain\]"):
        importlib.import_module("agent_sessions.integrations.langchain")


@pytest.mark.django_db
def test_compact_keeps_tool_calls_and_results_together():
    from agent_sessions import create_compact_function

    history = DjangoChatMessageHistory("lc-compact")
    history.add_messages(conversation())
    compact = create_compact_function(
        lambda prompt: "SUMMARY", protect_head=1, tail_token_budget=10, min_tail_messages=2
    )
    assert Session.create().for_session("lc-compact").on_compaction(compact).compact() is not None
    messages = history.messages
    assert messages[0] == conversation()[0]
    assert messages[1].content == "SUMMARY"
    assert len(messages) < len(conversation())
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    assert calls == results
    assert messages[-1] == conversation()[-1]


# ── the read path skips validation only for dumps it would not change ──
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
short = st.text(max_size=12)
contents = short | st.lists(short | st.fixed_dictionaries({"type": st.just("text"), "text": short}), max_size=3)
calls = st.lists(
    st.builds(
        lambda n, a, i: {"name": n, "args": a, "id": i, "type": "tool_call"},
        short,
        st.dictionaries(short, json_values, max_size=3),
        st.none() | short,
    ),
    max_size=2,
)
common = {
    "content": contents,
    "id": st.none() | short,
    "name": st.none() | short,
    "additional_kwargs": st.dictionaries(short, json_values, max_size=2),
}
langchain_messages = st.one_of(
    st.builds(HumanMessage, **common),
    st.builds(SystemMessage, **common),
    st.builds(
        AIMessage,
        **common,
        tool_calls=calls,
        invalid_tool_calls=st.lists(
            st.builds(
                lambda n, a, e: {"name": n, "args": a, "id": "bad", "error": e, "type": "invalid_tool_call"},
                short,
                short,
                st.none() | short,
            ),
            max_size=1,
        ),
        usage_metadata=st.none() | st.just({"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}),
        response_metadata=st.dictionaries(short, json_values, max_size=2),
    ),
    st.builds(
        ToolMessage, **common, tool_call_id=short, status=st.sampled_from(["success", "error"]), artifact=json_values
    ),
)


@settings(max_examples=200, deadline=None)
@given(langchain_messages)
def test_stored_messages_rebuild_without_validation_equal_to_validated_ones(message):
    stored = json.loads(json.dumps(message_to_dict(message)))  # what a row holds
    (validated,) = messages_from_dict([stored])
    assert _as_dumped(_REBUILT[stored["type"]], stored["data"], stored["type"])  # the fast path is the one taken
    rebuilt = rebuild(stored)
    assert type(rebuilt) is type(validated)
    assert rebuilt == validated
    assert rebuilt.__dict__ == validated.__dict__
    assert rebuilt.model_fields_set == validated.model_fields_set
    assert to_langchain(from_langchain(message)) == [validated]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(content=7),  # validation coerces or rejects; never taken as is
        lambda d: d.update(extra_field=1),
        lambda d: d.pop("id"),
        lambda d: d.update(
            tool_calls=[], additional_kwargs={"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}
        ),
        lambda d: d.update(tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
    ],
)
def test_edited_dumps_go_through_validation(edit):
    stored = message_to_dict(AIMessage(content="x", tool_calls=[{"name": "f", "args": {}, "id": "c"}]))
    edit(stored["data"])
    assert not _as_dumped(AIMessage, stored["data"], "ai")
    try:
        expected = messages_from_dict([stored])[0]
    except Exception as error:  # noqa: BLE001 - whatever validation raises, the read raises too
        with pytest.raises(type(error)):
            rebuild(stored)
    else:
        assert rebuild(stored) == expected


def test_chunks_and_other_kinds_are_read_by_langchain_itself():
    for message in [AIMessageChunk(content="part"), ChatMessage(content="x", role="critic")]:
        stored = message_to_dict(message)
        assert rebuild(stored) == messages_from_dict([stored])[0]


def test_a_foreign_assistant_message_becomes_one_ai_message_per_step():
    from agent_sessions.integrations.langchain import to_langchain

    weather = {"type": "tool-weather", "toolCallId": "c1", "state": "output-available", "input": {"city": "Kyoto"}}
    row = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Let me check."},
            {**weather, "output": "18 °C"},
            {"type": "tool-weather", "toolCallId": "c2", "state": "input-available", "input": {}},
            {"type": "step-start"},
            {"type": "text", "text": "It is 18 °C."},
        ],
    }
    out = to_langchain(row)
    assert [m.type for m in out] == ["ai", "tool", "ai"]
    assert out[0].content == "Let me check."
    assert [c["id"] for c in out[0].tool_calls] == ["c1"]  # c2 never got a result: not sent
    assert out[1].tool_call_id == "c1"
    assert out[2].content == "It is 18 °C."
