"""Conversations for the admin tests (helpers only, no tests): a small branched one, and a 10,000-row one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from agent_sessions import Session
from agent_sessions.models import Compaction, ContextBlockRecord, Message, SessionRecord
from agent_sessions.tokens import estimate_one_message_tokens
from agent_sessions.types import text_content


def text(mid: str, role: str, body: str) -> dict:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


def branched_session(session_id: str, *, name: str = "Weather chat", model: str = "gpt-test") -> Session:
    """u1 → a1(tool call) → u2 → a2 → u3 → a3, plus u2 → a2b (a regenerate); an overlay over u1..a1.

    The main branch is appended last, so its leaf ``a3`` is the latest leaf.
    """
    SessionRecord.objects.create(
        id=session_id,
        name=name,
        model=model,
        source="web",
        input_tokens=120,
        output_tokens=80,
        estimated_cost=0.0125,
        end_reason=None,
    )
    session = Session.create().for_session(session_id)
    session.append_message(text("u1", "user", "Hello, what is the weather in Kyoto?"))
    session.append_message(
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "Let me check the forecast service."},
                {
                    "type": "tool-get_weather",
                    "toolCallId": "call-1",
                    "state": "output-available",
                    "input": {"city": "Kyoto", "days": 2},
                    "output": {"today": "rain", "tomorrow": "cloudy"},
                },
            ],
        }
    )
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
    return Message(
        message_id=mid,
        session_id=session_id,
        parent_id=parent,
        role=role,
        content=json.dumps(message, separators=(",", ":")),
        text_content=text_content(message),
        depth=depth,
        tokens=tokens,
        path_tokens=path_tokens + tokens,
    )


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
    Compaction.objects.create(
        compaction_id="big-long",
        session_id=session_id,
        summary="Long middle summary.",
        from_message_id="m10",
        to_message_id=f"m{main_len // 2}",
    )
    Compaction.objects.create(
        compaction_id="big-short",
        session_id=session_id,
        summary="Short tail summary.",
        from_message_id=f"m{main_len - 30}",
        to_message_id=f"m{main_len - 20}",
    )
    return {"main_len": main_len, "leaf": f"m{main_len - 1}", "forks": [f.message_id for f in forks]}


# ── The operator's 10,000-message session ────────────────────────────────────────────────────────
OPERATOR_START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
OPERATOR_STEP = timedelta(seconds=30)
SIDE_BRANCHES = (  # (fork point on the main path, branch length): 12 branches at 11 points -> 13 leaves
    (50, 20),
    (500, 6),
    (2000, 40),
    (4500, 80),
    (5000, 12),
    (6000, 30),
    (7000, 50),
    (8000, 8),
    (8500, 25),
    (9100, 60),
    (9400, 15),
    (9400, 34),
)
OPERATOR_TOTAL = 10_000
OPERATOR_MAIN = OPERATOR_TOTAL - sum(n for _, n in SIDE_BRANCHES)
BIG_RANGE = (100, 4099)  # 4,000 messages compacted
SMALL_RANGE = (9000, 9029)
NEEDLE_AT = 2345  # the only message saying "zebracrossing" (inside the big range)
UMBRELLA_EVERY = 34  # main-path messages with i % 34 == 0 mention "umbrella"
LONG_EVERY = 7


def _operator_body(i: int, prefix: str) -> list[dict]:
    """Deterministic parts for message ``i``: long texts, Japanese, tool calls (some failing), needles."""
    words = [f"{prefix}{i} notes on the rail timetable and the weather in Kyoto."]
    if i % UMBRELLA_EVERY == 0 and prefix == "m":
        words.append("Bring an umbrella.")
    if i == NEEDLE_AT and prefix == "m":
        words.append("The zebracrossing near the station was closed.")
    if i % 13 == 0:
        words.append("京都の天気は雨です。傘を持って行きましょう。")
    if i % LONG_EVERY == 0:
        filler = " ".join(f"Paragraph {k} of a long answer about timetables, delays and platforms." for k in range(70))
        words.append(filler * (1 + i % 2))  # 4-8 KB
    parts: list[dict] = [{"type": "text", "text": " ".join(words)}]
    if i % 11 == 5:
        failed = i % 22 == 5
        tool = {
            "type": "tool-lookup_timetable",
            "toolCallId": f"call-{prefix}{i}",
            "input": {"line": "JR Nara", "n": i},
        }
        if failed:
            tool.update(state="output-error", errorText="TimeoutError upstream after 30s")
        else:
            tool.update(state="output-available", output={"departures": ["09:01", "09:16"], "delay_min": i % 9})
        parts.append(tool)
    return parts


def _operator_row(
    session_id: str,
    mid: str,
    parent: str | None,
    role: str,
    parts: list[dict],
    depth: int,
    path_tokens: int,
    when: datetime,
) -> Message:
    message = {"id": mid, "role": role, "parts": parts}
    tokens = estimate_one_message_tokens(message)
    return Message(
        message_id=mid,
        session_id=session_id,
        parent_id=parent,
        role=role,
        content=json.dumps(message, ensure_ascii=False, separators=(",", ":")),
        text_content=text_content(message),
        depth=depth,
        tokens=tokens,
        path_tokens=path_tokens + tokens,
        created_at=when,
    )


def operator_session(session_id: str = "ops") -> dict:
    """10,000 messages: a 9,620-deep main path, 12 side branches (13 leaves, 11 branch points), overlays over
    m100..m4099 (4,000 messages) and m9000..m9029, tool calls (some failed), 4-8 KB texts, Japanese, a frozen
    system prompt and context blocks. Side branches are inserted first, so the main path's end is the latest leaf."""
    SessionRecord.objects.create(
        id=session_id, name="Operator debugging", model="gpt-ops", source="support", parent_session_id="ops-origin"
    )
    main: list[Message] = []
    parent, tokens = None, 0
    for i in range(OPERATOR_MAIN):
        role = "user" if i % 2 == 0 else "assistant"
        row = _operator_row(
            session_id, f"m{i}", parent, role, _operator_body(i, "m"), i + 1, tokens, OPERATOR_START + i * OPERATOR_STEP
        )
        main.append(row)
        parent, tokens = row.message_id, row.path_tokens
    side: list[Message] = []
    for k, (at, length) in enumerate(SIDE_BRANCHES):
        fork = main[at]
        parent, tokens = fork.message_id, fork.path_tokens
        for j in range(length):
            role = "assistant" if j % 2 == 0 else "user"
            when = fork.created_at + timedelta(seconds=1 + j)
            row = _operator_row(
                session_id, f"b{k}-{j}", parent, role, _operator_body(j, f"b{k}-"), at + 2 + j, tokens, when
            )
            side.append(row)
            parent, tokens = row.message_id, row.path_tokens
    Message.objects.bulk_create(side, batch_size=500)
    Message.objects.bulk_create(main, batch_size=500)
    points = "\n".join(f"- point {k}: delays on the JR Nara line were discussed." for k in range(9000))  # ~490 KB
    Compaction.objects.create(
        compaction_id="ops-big",
        session_id=session_id,
        from_message_id=f"m{BIG_RANGE[0]}",
        to_message_id=f"m{BIG_RANGE[1]}",
        summary="## Topic\n- Rail timetables in Kyoto.\n\n## Key Points\n" + points,
    )
    Compaction.objects.create(
        compaction_id="ops-small",
        session_id=session_id,
        summary="Short tail summary.",
        from_message_id=f"m{SMALL_RANGE[0]}",
        to_message_id=f"m{SMALL_RANGE[1]}",
    )
    prompt = "\n".join(
        [
            "═" * 46,
            "SOUL [readonly]",
            "═" * 46,
            "You are a careful rail assistant.",
            "",
            "═" * 46,
            "MEMORY (Learned facts) [writable]",
            "═" * 46,
            "User prefers the JR line.",
        ]
    )
    frozen = OPERATOR_START - timedelta(minutes=5)
    memory_written = main[5000].created_at
    ContextBlockRecord.objects.create(label=f"_system_prompt_{session_id}", content=prompt, updated_at=frozen)
    ContextBlockRecord.objects.create(
        label=f"soul_{session_id}", content="You are a careful rail assistant.", updated_at=frozen
    )
    ContextBlockRecord.objects.create(
        label=f"memory_{session_id}", content="User prefers the JR line. " * 200, updated_at=memory_written
    )
    return {"main_len": OPERATOR_MAIN, "leaf": f"m{OPERATOR_MAIN - 1}", "memory_written": memory_written}


# ── Model-call records (SPEC §8) ─────────────────────────────────────────────────────────────────
def recorded_session(session_id: str, marker: str = "") -> Session:
    """:func:`branched_session` with recorded calls: ``a4`` and its regeneration ``a4b`` (siblings of
    parent ``u3``, different models and temperatures) and a failed call. ``marker`` with a suffix naming where it
    stands: ``-block`` (a context block, hence the frozen prompt), ``-sum`` (a summary), ``-tool`` (a
    tool call), ``-msg`` (the replies), ``-input`` (the tools offered, only in the model inputs).
    """
    branched_session(session_id)
    session = Session.create().for_session(session_id).with_context("memory", description="facts")
    session = session.with_cached_prompt()
    session.replace_context_block("memory", f"the user carries an umbrella {marker}-block")
    session.freeze_system_prompt()
    session.add_compaction(f"They discussed tomorrow {marker}-sum", "u2", "a2")
    tools = [{"name": "get_weather", "description": f"Forecast {marker}-input", "parameters": {"type": "object"}}]
    with session.model_call(model="gpt-a", params={"temperature": 0.2}, tools=tools, leaf_id="u3") as call:
        reply = text("a4", "assistant", f"Umbrella, yes. {marker}-msg")
        reply["parts"].append(
            {
                "type": "tool-get_weather",
                "toolCallId": "call-9",
                "state": "input-available",
                "input": {"q": f"{marker}-tool"},
            }
        )
        call.finish(reply, usage={"input_tokens": 800, "output_tokens": 40}, cost=0.002)
    with session.model_call(model="gpt-b", params={"temperature": 0.9}, tools=tools, leaf_id="u3") as call:
        call.finish(
            text("a4b", "assistant", f"No umbrella needed. {marker}-msg"),
            usage={"prompt_tokens": 810, "completion_tokens": 12},
            cost=0.09,
        )
    try:
        with session.model_call(model="gpt-a", params={}, leaf_id="a4"):
            raise RuntimeError("upstream 503")
    except RuntimeError:
        pass
    return session


def big_call_history(session_id: str, calls: int = 5_000, *, main_len: int) -> None:
    """``calls`` recorded calls of the :func:`big_session` (the assistant rows of its main path, round robin),
    sharing a prompt, a tool list and one overlay by hash, as ``Session.model_call`` stores them."""
    from agent_sessions.models import ModelCallContent, ModelCallRecord
    from agent_sessions.session.model_calls import content_hash

    system = "You are the big test bot. " * 40
    tools = json.dumps([{"name": f"tool_{i}", "description": "d", "parameters": {}} for i in range(8)])
    overlay = json.dumps(
        {"id": "big-short", "summary": "Short tail summary.", "from_message_id": f"m{main_len - 30}",
         "to_message_id": f"m{main_len - 20}"}
    )  # fmt: skip
    hashes = {
        kind: content_hash(kind, value) for kind, value in (("system", system), ("tools", tools), ("overlay", overlay))
    }
    ModelCallContent.objects.bulk_create(
        [
            ModelCallContent(session_id=session_id, hash=hashes["system"], kind="system", content=system),
            ModelCallContent(session_id=session_id, hash=hashes["tools"], kind="tools", content=tools),
            ModelCallContent(session_id=session_id, hash=hashes["overlay"], kind="overlay", content=overlay),
        ]
    )
    replies = list(range(1, main_len, 2))
    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    rows = []
    for k in range(calls):
        i = replies[k % len(replies)]
        rows.append(
            ModelCallRecord(
                call_id=f"call-{k}",
                session_id=session_id,
                message_id=f"m{i}",
                leaf_id=f"m{i - 1}",
                overlays=json.dumps([hashes["overlay"]]) if i > main_len - 20 else "[]",
                system_hash=hashes["system"],
                tools_hash=hashes["tools"],
                model="gpt-big" if k % 3 else "gpt-small",
                params='{"temperature": 0.5}',
                usage=json.dumps({"input_tokens": 100 + k % 7, "output_tokens": 10}),
                cost=0.001 * (k % 100),
                latency_ms=100.0 * (k % 150),
                status="error" if k % 50 == 0 else "ok",
                error="timeout" if k % 50 == 0 else "",
                started_at=start + timedelta(seconds=k),
            )
        )
    ModelCallRecord.objects.bulk_create(rows, batch_size=1000)
