"""Conversations for the admin tests (helpers only, no tests): a small branched one, and a 10,000-row one."""

from __future__ import annotations

import json

from agent_sessions import Session
from agent_sessions.models import Compaction, Message, SessionRecord
from agent_sessions.tokens import estimate_one_message_tokens
from agent_sessions.types import text_content


def text(mid: str, role: str, body: str) -> dict:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


def branched_session(session_id: str, *, name: str = "Weather chat", model: str = "gpt-test") -> Session:
    """u1 → a1(tool call) → u2 → a2 → u3 → a3, plus u2 → a2b (a regenerate); an overlay over u1..a1.

    The main branch is appended last, so its leaf ``a3`` is the latest leaf.
    """
    SessionRecord.objects.create(id=session_id, name=name, model=model, source="web", input_tokens=120,
                                 output_tokens=80, estimated_cost=0.0125, end_reason=None)
    session = Session.create().for_session(session_id)
    session.append_message(text("u1", "user", "Hello, what is the weather in Kyoto?"))
    session.append_message({
        "id": "a1", "role": "assistant",
        "parts": [
            {"type": "text", "text": "Let me check the forecast service."},
            {"type": "tool-get_weather", "toolCallId": "call-1", "state": "output-available",
             "input": {"city": "Kyoto", "days": 2}, "output": {"today": "rain", "tomorrow": "cloudy"}},
        ],
    })
    session.append_message(text("u2", "user", "Please include tomorrow too."))
    session.append_message(text("a2b", "assistant", "Alternative answer: sunny everywhere."))
    session.append_message(text("a2", "assistant", "Today rain, tomorrow cloudy."), "u2")
    session.append_message(text("u3", "user", "Thanks! Umbrella then?"))
    session.append_message(text("a3", "assistant", "Yes, take an umbrella today."))
    session.add_compaction("User asked about Kyoto weather; assistant checked the forecast.", "u1", "a1")
    return session


def _row(session_id: str, mid: str, parent: str | None, depth: int, path_tokens: int, role: str) -> Message:
    message = text(mid, role, f"message {mid} talks about rivers and mountains")
    tokens = estimate_one_message_tokens(message)
    return Message(message_id=mid, session_id=session_id, parent_id=parent, role=role,
                   content=json.dumps(message, separators=(",", ":")), text_content=text_content(message),
                   depth=depth, tokens=tokens, path_tokens=path_tokens + tokens)


def big_session(session_id: str, *, total: int = 10_000, branches: int = 10, branch_len: int = 50) -> dict:
    """``total`` messages: a main path plus ``branches`` side branches, two overlays (one long, one short).

    Side branches are inserted first and the main path last, so the main
    path's end is the latest leaf. Depth and path tokens are computed here.
    """
    SessionRecord.objects.create(id=session_id, name="Big", model="gpt-big", source="bench")
    main_len = total - branches * branch_len
    main: list[Message] = []
    path_tokens = 0
    parent = None
    for i in range(main_len):
        row = _row(session_id, f"m{i}", parent, i + 1, path_tokens, "user" if i % 2 == 0 else "assistant")
        main.append(row)
        path_tokens, parent = row.path_tokens, row.message_id
    side: list[Message] = []
    forks = [main[(k + 1) * (main_len // (branches + 1))] for k in range(branches)]
    for k, at in enumerate(forks):
        parent, depth, tokens = at.message_id, at.depth, at.path_tokens
        for j in range(branch_len):
            row = _row(session_id, f"b{k}-{j}", parent, depth + 1, tokens, "assistant" if j % 2 == 0 else "user")
            side.append(row)
            parent, depth, tokens = row.message_id, row.depth, row.path_tokens
    Message.objects.bulk_create(side, batch_size=1000)
    Message.objects.bulk_create(main, batch_size=1000)
    Compaction.objects.create(compaction_id="big-long", session_id=session_id, summary="Long middle summary.",
                              from_message_id="m10", to_message_id=f"m{main_len // 2}")
    Compaction.objects.create(compaction_id="big-short", session_id=session_id, summary="Short tail summary.",
                              from_message_id=f"m{main_len - 30}", to_message_id=f"m{main_len - 20}")
    return {"main_len": main_len, "leaf": f"m{main_len - 1}", "forks": [f.message_id for f in forks]}
