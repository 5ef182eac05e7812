"""Session.add_tool_result and the tool loop, on the real database (SQLite and Postgres)."""

from __future__ import annotations

import asyncio

import pytest

from agent_sessions import InvalidMessage, Session, Tool, arun_tool_calls, run_tool_calls
from agent_sessions.convert import pending_tool_calls, to_anthropic, to_openai_chat
from tests.conftest import msg

pytestmark = pytest.mark.django_db


def call(call_id, name="weather", tool_input=None, **extra):
    return {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "state": "input-available",
        "input": {"city": "Kyoto"} if tool_input is None else tool_input,
        **extra,
    }


def calls(id, *parts):
    return {"id": id, "role": "assistant", "parts": list(parts)}


@pytest.fixture
def agent(session_id):
    return Session.create().for_session(session_id).with_context("memory", description="Facts", max_tokens=1100)


# ── add_tool_result ─────────────────────────────────────────────────────────


def test_add_tool_result_sets_the_output_on_the_stored_part(session):
    session.append_message(msg("u"))
    session.append_message(calls("a", {"type": "text", "text": "Checking."}, call("c1"), call("c2")))
    updated = session.add_tool_result("c1", {"temp": 21})
    expected = calls(
        "a",
        {"type": "text", "text": "Checking."},
        {**call("c1"), "state": "output-available", "output": {"temp": 21}},
        call("c2"),
    )
    assert updated == expected
    assert session.get_message("a") == expected
    assert [m["id"] for m in session.get_history()] == ["u", "a"]  # updated in place, no new message


def test_add_tool_result_stores_errors_as_output_error(session):
    session.append_message(calls("a", call("c1")))
    updated = session.add_tool_result("c1", error="city not found")
    part = session.get_message("a")["parts"][0]
    assert part == {**call("c1"), "state": "output-error", "errorText": "city not found"} == updated["parts"][0]


def test_add_tool_result_finds_the_latest_message_on_the_path_with_that_call(session):
    session.append_message(calls("a1", call("c1")))
    session.append_message(msg("u2"))
    session.append_message(calls("a2", call("c1")))  # the same id again, later on the path
    session.append_message(msg("u3"))
    session.add_tool_result("c1", "sunny")
    assert session.get_message("a2")["parts"][0]["output"] == "sunny"
    assert session.get_message("a1")["parts"][0]["state"] == "input-available"
    session.add_tool_result("c1", "rainy", message_id="a1")
    assert session.get_message("a1")["parts"][0]["output"] == "rainy"


def test_a_call_on_another_branch_is_not_on_the_current_path(session):
    session.append_message(msg("u"))
    session.append_message(calls("a", call("c1")), "u")
    session.append_message(msg("b"), "u")  # the latest leaf: the path is u → b
    with pytest.raises(InvalidMessage, match="c1"):
        session.add_tool_result("c1", "x")
    assert session.get_message("a")["parts"][0]["state"] == "input-available"


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("nope", "x"), {}, "no tool call 'nope'"),
        (("c1", "x"), {"message_id": "missing"}, "no message 'missing'"),
        (("c1", "x"), {"message_id": "u"}, "has no tool call"),
        (("", "x"), {}, "non-empty"),
        ((None, "x"), {}, "non-empty"),
        (("c1", "x"), {"error": "boom"}, "not both"),
        (("c1",), {"error": 42}, "must be a string"),
        (("c1", object()), {}, "JSON"),
        (("c1", float("nan")), {}, "JSON"),
    ],
)
def test_bad_tool_results_raise_and_write_nothing(session, args, kwargs, match):
    session.append_message(msg("u"))
    session.append_message(calls("a", call("c1")))
    before = session.get_history()
    with pytest.raises(InvalidMessage, match=match):
        session.add_tool_result(*args, **kwargs)
    assert session.get_history() == before


def test_a_second_different_result_is_refused_and_the_same_one_is_a_no_op(session):
    session.append_message(calls("a", call("c1")))
    first = session.add_tool_result("c1", "sunny")
    assert session.add_tool_result("c1", "sunny") == first
    with pytest.raises(InvalidMessage, match="already has a result"):
        session.add_tool_result("c1", error="late failure")
    assert session.get_message("a") == first


def test_dynamic_tool_parts_take_results_too(session):
    part = {
        "type": "dynamic-tool",
        "toolName": "lookup",
        "toolCallId": "d1",
        "state": "input-available",
        "input": {"q": "x"},
    }
    session.append_message(calls("a", part))
    assert session.add_tool_result("d1", "found")["parts"][0] == {
        **part,
        "state": "output-available",
        "output": "found",
    }


@pytest.mark.django_db(transaction=True)
def test_aadd_tool_result_is_the_async_twin(session):
    session.append_message(calls("a", call("c1")))
    updated = asyncio.run(session.aadd_tool_result("c1", "sunny"))
    assert updated["parts"][0]["output"] == "sunny" == session.get_message("a")["parts"][0]["output"]


# ── the tool loop ───────────────────────────────────────────────────────────


def weather(city: str) -> dict:
    return {"city": city, "sky": "clear"}


def broken(**_):
    raise RuntimeError("backend down")


def test_run_tool_calls_runs_callables_and_session_tools_and_stores_every_outcome(agent):
    agent.append_message(msg("u"))
    message = calls(
        "a",
        {"type": "text", "text": "On it."},
        call("c1"),
        call("c2", "set_context", {"label": "memory", "content": "Ada likes Kyoto."}),
        call("c3", "set_context", {"label": "nope", "content": "x"}),
        call("c4", "broken", {}),
        call("c5", "teleport", {}),
        call("c6", "weather", ["not", "an", "object"]),
    )
    updated = run_tool_calls(agent, message, {"weather": weather, "broken": broken})
    parts = {p["toolCallId"]: p for p in updated["parts"] if "toolCallId" in p}
    assert parts["c1"]["state"] == "output-available"
    assert parts["c1"]["output"] == {"city": "Kyoto", "sky": "clear"}
    assert parts["c2"]["state"] == "output-available"
    assert parts["c2"]["output"].startswith("Written to memory.")
    assert parts["c3"]["state"] == "output-error"
    assert parts["c3"]["errorText"].startswith("Error:")
    assert parts["c4"] == {
        **call("c4", "broken", {}),
        "state": "output-error",
        "errorText": "RuntimeError: backend down",
    }
    assert parts["c5"]["state"] == "output-error"
    assert parts["c5"]["errorText"] == "Unknown tool 'teleport'"
    assert parts["c6"]["state"] == "output-error"
    assert "weather" in parts["c6"]["errorText"]
    assert agent.get_message("a") == updated  # appended first, then every result stored
    assert agent.get_context_block("memory").content == "Ada likes Kyoto."
    assert pending_tool_calls(updated) == []
    tool_messages = [m for m in to_openai_chat(agent.get_history()) if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2", "c3", "c4", "c5", "c6"]


def test_run_tool_calls_skips_answered_calls_and_accepts_a_list_of_tools(agent):
    shout = Tool(
        "shout",
        "Upper-case",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        lambda text: text.upper(),
    )
    done = {**call("c0"), "state": "output-available", "output": "old"}
    agent.append_message(calls("a", done, call("c1", "shout", {"text": "hi"})))
    updated = run_tool_calls(agent, agent.get_message("a"), [shout])
    assert updated["parts"] == [
        done,
        {**call("c1", "shout", {"text": "hi"}), "state": "output-available", "output": "HI"},
    ]
    assert run_tool_calls(agent, updated) == updated  # nothing pending: nothing to do


def test_the_results_reach_the_model_in_each_format(agent):
    agent.append_message(msg("u"))
    run_tool_calls(agent, calls("a", call("c1"), call("c2", "broken", {})), {"weather": weather, "broken": broken})
    anthropic = to_anthropic(agent.get_history())["messages"]
    assert anthropic[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": '{"city":"Kyoto","sky":"clear"}'},
            {"type": "tool_result", "tool_use_id": "c2", "content": "RuntimeError: backend down", "is_error": True},
        ],
    }


@pytest.mark.django_db(transaction=True)
def test_arun_tool_calls_runs_sync_and_async_tools(agent):
    async def slow_weather(city: str) -> str:
        await asyncio.sleep(0)
        return f"{city}: clear"

    agent.append_message(msg("u"))
    message = calls(
        "a", call("c1"), call("c2", "set_context", {"label": "memory", "content": "Fact."}), call("c3", "broken", {})
    )
    updated = asyncio.run(arun_tool_calls(agent, message, {"weather": slow_weather, "broken": broken}))
    outputs = [(p["state"], p.get("output", p.get("errorText"))) for p in updated["parts"]]
    assert outputs[0] == ("output-available", "Kyoto: clear")
    assert outputs[1][0] == "output-available"
    assert outputs[1][1].startswith("Written to memory.")
    assert outputs[2] == ("output-error", "RuntimeError: backend down")
    assert agent.get_message("a") == updated


def test_run_tool_calls_completes_the_stored_copy_and_rejects_messages_without_an_id(agent):
    agent.append_message(calls("a", call("c1"), call("c2")))
    stale = agent.get_message("a")
    agent.add_tool_result("c1", "stored earlier")
    updated = run_tool_calls(agent, stale, {"weather": weather})
    assert updated["parts"][0]["output"] == "stored earlier"
    assert updated["parts"][1]["output"] == {"city": "Kyoto", "sky": "clear"}
    for bad in ({"role": "assistant", "parts": [call("c9")]}, "not a message"):
        with pytest.raises(InvalidMessage, match="with an id"):
            run_tool_calls(agent, bad, {"weather": weather})
