"""Checked by mypy in ``make lint`` (never run): messages are ``UIMessage``s, not ``Any``.

A well-formed message type-checks as written; each ``# type: ignore[...]`` below marks a mistake
mypy must report (``warn_unused_ignores`` fails the lint if it stops reporting one, e.g. when
``append_message``'s parameter turns back into ``dict`` or ``Any``).
"""

from __future__ import annotations

from typing import assert_type

from agent_sessions import (
    DynamicToolUIPart,
    Session,
    SessionManager,
    TextUIPart,
    ToolUIPart,
    UIMessage,
    UIMessagePart,
    UIRole,
    run_tool_calls,
)


def well_formed(session: Session, manager: SessionManager) -> None:
    question: UIMessage = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather in Kyoto?"}]}
    call: ToolUIPart = {"type": "tool-weather", "toolCallId": "c1", "state": "input-available", "input": {"q": "Kyoto"}}
    dynamic: DynamicToolUIPart = {
        "type": "dynamic-tool", "toolName": "search", "toolCallId": "c2", "state": "output-error", "errorText": "down",
    }  # fmt: skip
    answer: UIMessage = {
        "id": "a1",
        "role": "assistant",
        "parts": [{"type": "step-start"}, call, dynamic, {"type": "reasoning", "text": "look it up"}],
        "metadata": {"model": "gpt-test"},
    }
    assert_type(session.append_message(question), bool)
    assert_type(session.append_message(answer, "u1"), bool)
    assert_type(manager.append("s", question), str)
    assert_type(run_tool_calls(session, answer), UIMessage)
    history = session.get_history()
    assert_type(history, list[UIMessage])
    first: UIMessagePart = history[0]["parts"][0]
    assert_type(first["type"], str)
    greeting: TextUIPart = {"type": "text", "text": "hello", "state": "done"}
    assert_type(greeting["text"], str)
    leaf = session.get_latest_leaf()
    if leaf is not None:
        assert_type(leaf["role"], UIRole)
        assert_type(leaf["id"], str)


def mistakes(session: Session, manager: SessionManager) -> None:
    session.append_message({"id": "m", "role": "user"})  # type: ignore[typeddict-item]
    session.append_message({"id": "m", "role": "robot", "parts": []})  # type: ignore[typeddict-item]
    session.append_message({"id": 1, "role": "user", "parts": []})  # type: ignore[typeddict-item]
    session.append_message({"id": "m", "role": "user", "parts": [{"type": "text"}]})  # type: ignore[typeddict-item]
    session.update_message("m")  # type: ignore[arg-type]
    manager.append_all("s", [{"id": "m", "parts": []}])  # type: ignore[typeddict-item]
