"""Framework adapters: reading an n-item history with tools, ours vs the framework's own store.

    python -m bench.integrations [n] [alias]    # standalone: migrates bench.settings' database first

For each adapter: the median time of the read the framework calls (``get_items()``,
``messages``, ``get_messages()``), the share of it spent converting rows to framework
objects (must stay under 20 %), and, for the Agents SDK, its own ``SQLiteSession``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from .harness import Result, median_of, print_table, script_main, timed

ROUNDS = 5


def agents_items(n: int) -> list[dict]:
    """n Agents SDK items in turns of user → reasoning → call → result → answer."""
    items: list[dict] = []
    for t in range(n // 5 + 1):
        items += [
            {"role": "user", "content": f"Question {t}: what is the weather in city number {t}?"},
            {"type": "reasoning", "id": f"rs_{t}", "summary": [{"type": "summary_text", "text": "Use the tool."}]},
            {
                "type": "function_call",
                "id": f"fc_{t}",
                "call_id": f"call_{t}",
                "name": "get_weather",
                "arguments": f'{{"city": "city {t}"}}',
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": f"call_{t}", "output": f"rain, {t % 30} °C"},
            {
                "id": f"msg_{t}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"In city {t} it rains.", "annotations": []}],
            },
        ]
    return items[:n]


def langchain_messages(n: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for t in range(n // 4 + 1):
        call = {"name": "get_weather", "args": {"city": f"city {t}"}, "id": f"call_{t}", "type": "tool_call"}
        out += [
            HumanMessage(content=f"Question {t}: what is the weather in city number {t}?"),
            AIMessage(content="", tool_calls=[call], response_metadata={"model_name": "m"}),
            ToolMessage(content=f"rain, {t % 30} °C", tool_call_id=f"call_{t}"),
            AIMessage(content=f"In city {t} it rains."),
        ]
    return out[:n]


def pydantic_ai_messages(n: int) -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    out: list[Any] = []
    for t in range(n // 4 + 1):
        out += [
            ModelRequest(parts=[UserPromptPart(content=f"Question {t}: what is the weather in city number {t}?")]),
            ModelResponse(
                parts=[ToolCallPart(tool_name="get_weather", args={"city": f"city {t}"}, tool_call_id=f"call_{t}")]
            ),
            ModelRequest(
                parts=[ToolReturnPart(tool_name="get_weather", content=f"rain, {t % 30} °C", tool_call_id=f"call_{t}")]
            ),
            ModelResponse(parts=[TextPart(content=f"In city {t} it rains.")]),
        ]
    return out[:n]


def run(n: int = 1_000, using: str = "default", rounds: int = ROUNDS, database: str | None = None) -> list[Result]:
    """Store n items through each adapter, then time the framework's read and its conversion share."""
    from agents import SQLiteSession

    from agent_sessions.integrations import langchain as lc
    from agent_sessions.integrations import openai_agents as oa
    from agent_sessions.integrations import pydantic_ai as pa

    database = database or using
    results: list[Result] = []
    tag = uuid.uuid4().hex[:8]

    # OpenAI Agents SDK, side by side with its own SQLiteSession (a file, as a deployment would use).
    items = agents_items(n)
    ours = oa.AgentsSession(f"bench-oa-{tag}", using=using)
    peer_path = str(Path(tempfile.mkdtemp(prefix="bench-agents-")) / "agents.sqlite3")
    peer = SQLiteSession(f"bench-{tag}", db_path=peer_path)
    asyncio.run(ours.add_items(items))
    asyncio.run(peer.add_items(items))
    assert asyncio.run(ours.get_items()) == asyncio.run(peer.get_items())
    read = median_of(lambda: asyncio.run(ours.get_items()), rounds)
    results.append(_share("agents: get_items()", database, read, ours.store.history, oa.message_to_items, rounds))
    results.append(
        Result(
            "agents: get_items()",
            database,
            "SQLiteSession (file)",
            median_of(lambda: asyncio.run(peer.get_items()), rounds),
            rounds,
        )
    )
    results.append(
        Result(
            "agents: get_items(limit=50)",
            database,
            "ours",
            median_of(lambda: asyncio.run(ours.get_items(50)), rounds),
            rounds,
        )
    )
    results.append(
        Result(
            "agents: get_items(limit=50)",
            database,
            "SQLiteSession (file)",
            median_of(lambda: asyncio.run(peer.get_items(50)), rounds),
            rounds,
        )
    )
    peer.close()

    # LangChain chat history.
    history = lc.DjangoChatMessageHistory(f"bench-lc-{tag}", using=using)
    history.add_messages(langchain_messages(n))
    read = median_of(lambda: history.messages, rounds)
    results.append(_share("langchain: messages", database, read, history.store.history, lc.to_langchain, rounds))

    # Pydantic AI message history (its conversion validates all rows in one batch).
    model_history = pa.ModelMessageHistory(f"bench-pai-{tag}", using=using)
    model_history.add_messages(pydantic_ai_messages(n))
    read = median_of(model_history.get_messages, rounds)
    rows = model_history.store.history()
    convert = median_of(lambda: pa.to_model_messages(rows), rounds)
    results.append(
        Result(
            "pydantic-ai: get_messages()", database, "ours", read, rounds, {"convert share": f"{convert / read:.0%}"}
        )
    )
    return results


def _share(workload: str, database: str, read: float, load, convert_one, rounds: int) -> Result:
    """A result row for ``read`` with the share of it spent in ``convert_one`` over the loaded rows."""
    rows = load()
    convert = median_of(lambda: [x for row in rows for x in convert_one(row)], rounds)
    return Result(
        workload, database, "ours", read, rounds, {"convert share": f"{convert / read:.0%}", "rows": len(rows)}
    )


def _main(n: int, using: str) -> None:
    seconds, results = timed(lambda: run(n, using))
    print_table(results)
    print(f"(total {seconds:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    script_main(sys.argv[1:], _main, 1_000)
