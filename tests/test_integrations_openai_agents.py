"""OpenAI Agents SDK adapter: a real Runner over three turns with tools, side by side with the SDK's SQLiteSession."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool

from agent_sessions import Session, SessionManager
from agent_sessions.integrations.openai_agents import ITEM_KIND, AgentsSession, item_to_message, message_to_items
from agent_sessions.models import Message, SessionRecord
from tests.support.fake_agents_model import TURNS, ScriptedModel, weather_script

pytestmark = pytest.mark.django_db(transaction=True)  # the adapter works in Django's sync thread

BASE = "/admin/agent_sessions"
RUN_CONFIG = RunConfig(tracing_disabled=True)


@function_tool
def get_weather(city: str) -> str:
    """The forecast for a city."""
    return {"Kyoto": "rain, 18 °C", "Osaka": "sunny, 21 °C"}[city]


def dumps(items) -> str:
    return json.dumps(items, ensure_ascii=False)


async def converse(session) -> ScriptedModel:
    model = ScriptedModel(weather_script())
    agent = Agent(name="weather", instructions="Answer about the weather.", model=model, tools=[get_weather])
    for turn in TURNS:
        await Runner.run(agent, turn, session=session, run_config=RUN_CONFIG)
    return model


def run_both(session_id: str):
    """The same script through our session and through SQLiteSession; returns both models and sessions."""
    ours, theirs = AgentsSession(session_id), SQLiteSession(session_id)

    async def go():
        return await converse(ours), await converse(theirs)

    ours_model, theirs_model = asyncio.run(go())
    return ours, theirs, ours_model, theirs_model


def test_runner_sees_its_own_history_back_unchanged():
    ours, theirs, ours_model, theirs_model = run_both("agents-1")
    assert len(ours_model.inputs) == 5  # two tool round trips and a plain answer
    # Every model call got byte-for-byte the input it gets with the SDK's own storage.
    assert [dumps(i) for i in ours_model.inputs] == [dumps(i) for i in theirs_model.inputs]
    ours_items, theirs_items = asyncio.run(ours.get_items()), asyncio.run(theirs.get_items())
    assert dumps(ours_items) == dumps(theirs_items)
    kinds = [i.get("type", "message") for i in ours_items]
    assert kinds.count("function_call") == 2
    assert kinds.count("function_call_output") == 2
    assert "reasoning" in kinds
    # The third turn's model call saw the first two turns' tool history.
    assert any(i.get("call_id") == "call_1" for i in ours_model.inputs[-1])


def test_get_items_limit_pop_and_clear_match_sqlite_session():
    ours, theirs, _, _ = run_both("agents-2")

    async def compare():
        for limit in (None, 0, 1, 3, 7, 100, -1):
            assert dumps(await ours.get_items(limit)) == dumps(await theirs.get_items(limit)), limit
        for _ in range(3):
            popped_ours, popped_theirs = await ours.pop_item(), await theirs.pop_item()
            assert popped_ours is not None
            assert dumps(popped_ours) == dumps(popped_theirs)
        assert dumps(await ours.get_items()) == dumps(await theirs.get_items())
        # Adding after a pop continues the same branch.
        extra = [{"role": "user", "content": "One more question"}]
        await ours.add_items(extra)
        await theirs.add_items(extra)
        assert dumps(await ours.get_items(2)) == dumps(await theirs.get_items(2))
        await ours.clear_session()
        await theirs.clear_session()
        assert await ours.get_items() == await theirs.get_items() == []
        assert await ours.pop_item() is None
        assert await theirs.pop_item() is None

    asyncio.run(compare())
    assert not Message.objects.filter(session_id="agents-2").exists()


def test_rows_are_ordinary_messages_one_per_item():
    ours, _, _, _ = run_both("agents-3")
    items = asyncio.run(ours.get_items())
    history = Session.create().for_session("agents-3").get_history()
    assert len(history) == len(items)
    assert [m["role"] for m in history[:4]] == ["user", "assistant", "assistant", "tool"]
    reasoning, call, result = history[1]["parts"][0], history[2]["parts"][0], history[3]["parts"][0]
    assert reasoning == {"type": "reasoning", "text": "The user wants weather; call the tool."}
    assert call == {
        "type": "tool-get_weather",
        "toolCallId": "call_1",
        "toolName": "get_weather",
        "state": "input-available",
        "input": {"city": "Kyoto"},
    }
    assert result["state"] == "output-available"
    assert result["output"] == "rain, 18 °C"
    assert result["toolName"] == "get_weather"
    assert all(m["parts"][-1]["type"] == f"data-{ITEM_KIND}" for m in history)
    record = SessionRecord.objects.get(id="agents-3")
    assert record.source == "openai-agents"
    assert record.name == "agents-3"


def test_search_admin_fork_and_compaction():
    from django.contrib.auth import get_user_model
    from django.test import Client

    ours, _, _, _ = run_both("agents-4")
    session = Session.create().for_session("agents-4")
    assert [r.role for r in session.search("umbrella")] == ["assistant"]
    assert session.search("Osaka")  # the user's question and the answer

    user = get_user_model().objects.create_superuser("admin", "a@example.com", "pw")
    client = Client()
    client.force_login(user)
    html = client.get(f"{BASE}/sessionrecord/agents-4/change/").content.decode()
    assert "get_weather" in html
    assert "Take an umbrella" in html
    assert "call_1" in html

    history = session.get_history()
    manager = SessionManager()
    # Fork at the first answer: the fork reads back the first turn's items unchanged.
    first_answer = next(i for i, m in enumerate(history) if "umbrella" in json.dumps(m))
    fork = manager.fork("agents-4", history[first_answer]["id"], "fork")
    all_items = asyncio.run(ours.get_items())
    fork_items = asyncio.run(AgentsSession(fork.id).get_items())
    assert dumps(fork_items) == dumps(all_items[: first_answer + 1])

    # Compact the first turn: get_items shows the summary as one assistant message, then the rest.
    manager.add_compaction("agents-4", "Kyoto was rainy.", history[1]["id"], history[first_answer]["id"])
    compacted = asyncio.run(ours.get_items())
    assert compacted[0] == all_items[0]
    assert compacted[1] == {"role": "assistant", "content": "Kyoto was rainy."}
    assert dumps(compacted[2:]) == dumps(all_items[first_answer + 1 :])

    # An SDK run continues on the compacted history and the fork independently.
    async def another_turn(session_obj):
        model = ScriptedModel(
            [
                [
                    {
                        "id": "msg_9",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "Noted.", "annotations": []}],
                    }
                ]
            ]
        )
        agent = Agent(name="weather", model=model, tools=[get_weather])
        await Runner.run(agent, "Noted?", session=session_obj, run_config=RUN_CONFIG)
        return model.inputs[0]

    seen = asyncio.run(another_turn(ours))
    assert {"role": "assistant", "content": "Kyoto was rainy."} in seen


def test_compact_with_a_summariser_keeps_tool_pairs_together():
    ours, _, _, _ = run_both("agents-5")
    session = Session.create().for_session("agents-5").on_compaction(_compact_fn())
    result = session.compact()
    assert result is not None
    items = asyncio.run(ours.get_items())
    summary = [i for i in items if i == {"role": "assistant", "content": "SUMMARY"}]
    assert len(summary) == 1
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    assert calls == outputs  # no call lost its output (or the reverse)


def _compact_fn():
    from agent_sessions import create_compact_function

    return create_compact_function(lambda prompt: "SUMMARY", protect_head=1, tail_token_budget=10, min_tail_messages=2)


def test_foreign_rows_render_as_input_items():
    message = {
        "id": "x",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Checking."},
            {
                "type": "tool-lookup",
                "toolCallId": "c9",
                "state": "output-available",
                "input": {"q": 1},
                "output": {"a": 2},
            },
        ],
    }
    assert message_to_items(message) == [
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "c9", "name": "lookup", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": "c9", "output": '{"a": 2}'},
    ]
    error = {
        "id": "y",
        "role": "assistant",
        "parts": [
            {
                "type": "dynamic-tool",
                "toolName": "t",
                "toolCallId": "c1",
                "state": "output-error",
                "input": {},
                "errorText": "boom",
            }
        ],
    }
    assert message_to_items(error)[-1] == {"type": "function_call_output", "call_id": "c1", "output": "boom"}


def test_unusual_items_round_trip_exactly():
    odd = [
        {"role": "developer", "content": "Be terse."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
                {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
            ],
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA=="},
        {"type": "function_call_output", "call_id": "unknown", "output": [{"type": "input_text", "text": "é"}]},
        {"role": "assistant", "content": "", "extra": {"nested": [1.5, None, True]}},
    ]
    store = AgentsSession("agents-odd")

    async def go():
        await store.add_items(odd)
        return await store.get_items()

    assert dumps(asyncio.run(go())) == dumps(odd)
    user = item_to_message(odd[1])
    assert [p["type"] for p in user["parts"]] == ["text", "file", f"data-{ITEM_KIND}"]  # inline data not duplicated
    assert item_to_message(odd[0])["role"] == "system"
    assert item_to_message(odd[4])["role"] == "tool"


def test_bad_items_write_nothing():
    from agent_sessions import InvalidMessage

    store = AgentsSession("agents-bad")
    with pytest.raises(InvalidMessage):
        asyncio.run(store.add_items([{"role": "user", "content": "ok"}, {"role": "user", "content": float("nan")}]))
    with pytest.raises(TypeError):
        asyncio.run(store.add_items(["not an item"]))
    assert not Message.objects.filter(session_id="agents-bad").exists()


def test_import_without_the_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "agent_sessions.integrations.openai_agents")
    with pytest.raises(ImportError, match=r"pip install django-agent-sessions\[openai-agents\]"):
        importlib.import_module("agent_sessions.integrations.openai_agents")


def test_get_items_limit_reads_a_window_that_agrees_with_the_full_history():
    ours, _, _, _ = run_both("agents-window")
    history = Session.create().for_session("agents-window").get_history()
    manager = SessionManager()
    manager.add_compaction("agents-window", "Turn one, summarised.", history[1]["id"], history[4]["id"])
    manager.add_compaction("agents-window", "Turns one and two.", history[1]["id"], history[8]["id"])

    async def compare():
        full = await ours.get_items()
        assert {"role": "assistant", "content": "Turns one and two."} in full
        for limit in range(1, len(full) + 3):
            assert await ours.get_items(limit) == full[-limit:], limit

    asyncio.run(compare())


def test_concurrent_pops_return_each_item_once():
    import threading

    from django.db import connection

    items = [{"role": "user", "content": f"item {i}"} for i in range(24)]
    AgentsSession("agents-pops").add_items_sync(items)
    popped: list[dict] = []
    lock = threading.Lock()

    def worker():
        session = AgentsSession("agents-pops")
        try:
            while (item := session.pop_item_sync()) is not None:
                with lock:
                    popped.append(item)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(i["content"] for i in popped) == sorted(i["content"] for i in items)
    assert AgentsSession("agents-pops").get_items_sync() == []


def test_a_configured_manager_compacts_adapter_writes():
    from agent_sessions import create_compact_function

    manager = (
        SessionManager()
        .on_compaction(create_compact_function(lambda prompt: "AUTO SUMMARY", protect_head=1, tail_token_budget=10))
        .compact_after(60)
    )
    ours = AgentsSession("agents-auto", manager=manager)
    asyncio.run(converse(ours))
    assert manager.get_compactions("agents-auto")
    items = asyncio.run(ours.get_items())
    assert {"role": "assistant", "content": "AUTO SUMMARY"} in items


def test_results_added_later_are_named_and_invisible_rows_are_skipped_by_pop():
    ours = AgentsSession("agents-later")
    ours.add_items_sync([{"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}])
    ours.add_items_sync(
        [
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
            {"type": "function_call_output", "call_id": ["odd"], "output": "?"},
        ]
    )
    rows = Session.create().for_session("agents-later").get_history()
    assert rows[1]["parts"][0]["type"] == "tool-lookup"
    assert rows[2]["parts"][0]["type"] == "tool-function"
    # A foreign reasoning-only row renders as no item: pop skips (and removes) it.
    Session.create().for_session("agents-later").append_message(
        {"id": "r", "role": "assistant", "parts": [{"type": "reasoning", "text": "hidden"}]}
    )
    assert ours.pop_item_sync() == {"type": "function_call_output", "call_id": ["odd"], "output": "?"}
    assert len(ours.get_items_sync()) == 2


# ── session_settings, as the SDK's own sessions take them (its suite's settings tests) ──
def test_session_settings_default_to_an_empty_session_settings():
    from agents.memory import SessionSettings

    settings = AgentsSession("agents-settings-0").session_settings
    assert isinstance(settings, SessionSettings)
    assert settings.limit is None


def test_a_dict_of_session_settings_is_normalised_and_its_limit_honoured():
    from agents.memory import SessionSettings

    session = AgentsSession("agents-settings-1", session_settings={"limit": 2})
    assert session.session_settings == SessionSettings(limit=2)
    items = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items[-2:]  # the settings' limit
    assert asyncio.run(session.get_items(limit=4)) == items[-4:]  # an explicit limit wins
    assert session.get_items_sync() == items[-2:]


def test_unknown_session_settings_fields_are_refused_as_the_sdk_refuses_them():
    with pytest.raises(TypeError, match="nope") as ours:
        AgentsSession("agents-settings-2", session_settings={"limit": 2, "nope": 1})
    with pytest.raises(TypeError, match="nope") as theirs:
        SQLiteSession("agents-settings-2", session_settings={"limit": 2, "nope": 1})
    assert str(ours.value) == str(theirs.value)
    assert not SessionRecord.objects.filter(id="agents-settings-2").exists()


def test_runner_takes_a_dict_settings_session_and_a_run_override():
    from agents.memory import SessionSettings

    session = AgentsSession("agents-settings-3", session_settings={"limit": 1})
    model = ScriptedModel(weather_script())
    agent = Agent(name="weather", instructions="Answer about the weather.", model=model, tools=[get_weather])
    asyncio.run(Runner.run(agent, TURNS[0], session=session, run_config=RUN_CONFIG))
    # The second turn's first model call sees one stored item (the settings' limit) plus the new input.
    override = RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=3))
    before = len(model.inputs)
    asyncio.run(Runner.run(agent, TURNS[1], session=session, run_config=override))
    first_call = model.inputs[before]
    assert len(first_call) == 4  # the last 3 stored items (the override) and the new user message
    assert first_call[-1] == {"role": "user", "content": TURNS[1]} or first_call[-1].get("content") == TURNS[1]
