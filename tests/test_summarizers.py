"""Summarisers: the offline extractive default and the OpenAI-compatible HTTP adapter (real HTTP, fake server)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import override_settings

from agent_sessions.compaction import build_summary_prompt, create_compact_function
from agent_sessions.exceptions import AgentSessionsError
from agent_sessions.summarizers import (
    MAX_SUMMARY_TOKENS,
    OpenAICompatibleSummarizer,
    SummarizerError,
    extractive_summarizer,
)
from agent_sessions.tokens import estimate_string_tokens

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)

SECTIONS = ["## Topic", "## Key Points", "## Current State", "## Open Items"]


def text(id: str, role: str, body: str) -> dict:
    return {"id": id, "role": role, "parts": [{"type": "text", "text": body}]}


def completion(content) -> bytes:
    message = {"role": "assistant", "content": content}
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
    ).encode()


# ── extractive_summarizer ────────────────────────────────────────────────────


TRIP = [
    text("a", "user", "I want to plan a trip to Kyoto. It should be in spring, ideally April."),
    {
        "id": "b",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Sure, I can help with that. Let me check the weather first."},
            {
                "type": "tool-weather",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"city": "Kyoto"},
                "output": {"temp": 18},
            },
        ],
    },
    text("c", "user", "Which hotels are near Gion? Also, are trains frequent?"),
]


def test_extractive_fills_the_four_sections_from_first_sentences():
    summary = extractive_summarizer(build_summary_prompt(TRIP, None, 300))
    positions = [summary.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    topic = summary[summary.index("## Topic") : summary.index("## Key Points")]
    assert "I want to plan a trip to Kyoto. It should be in spring, ideally April." in topic
    assert "- assistant: Sure, I can help with that. Let me check the weather first. (used weather)" in summary
    current = summary[summary.index("## Current State") : summary.index("## Open Items")]
    assert "Last message (user): Which hotels are near Gion?" in current
    open_items = summary[summary.index("## Open Items") :]
    assert "- Which hotels are near Gion?" in open_items
    assert "- Also, are trains frequent?" in open_items
    assert '"temp"' not in summary  # tool payloads are not quoted


def test_extractive_is_deterministic():
    prompt = build_summary_prompt(TRIP, None, 300)
    assert extractive_summarizer(prompt) == extractive_summarizer(prompt)


def test_extractive_update_keeps_the_previous_topic_and_points():
    first = extractive_summarizer(build_summary_prompt(TRIP, None, 300))
    second = extractive_summarizer(build_summary_prompt([text("d", "assistant", "Hotel A is near Gion.")], first, 300))
    assert "I want to plan a trip to Kyoto." in second[: second.index("## Key Points")]
    assert "- user: Which hotels are near Gion?" in second
    assert "- assistant: Hotel A is near Gion." in second
    assert "Last message (assistant): Hotel A is near Gion." in second
    assert second.endswith("## Open Items\n- None noted.")


def test_extractive_respects_the_budget_by_dropping_the_oldest_points():
    messages = [text(f"m{i}", "user", f"Point number {i} is about topic {i}. Details follow here.") for i in range(40)]
    summary = extractive_summarizer(build_summary_prompt(messages, None, 120))
    assert estimate_string_tokens(summary) <= 120
    assert "Point number 39" in summary
    assert "- user: Point number 1 is" not in summary
    assert all(s in summary for s in SECTIONS)


def test_extractive_is_bounded_whatever_the_range():
    body = "Kyoto trains run late tonight. " + "The upstream service answered slowly again. " * 180  # ~8 KB
    messages = [text(f"m{i}", "user" if i % 2 == 0 else "assistant", f"Turn {i}. {body}") for i in range(4_000)]
    prompt = build_summary_prompt(messages, None, 10**6)  # the range asks for far more than a summary should be
    summary = extractive_summarizer(prompt)
    assert 1_000 < estimate_string_tokens(summary) <= MAX_SUMMARY_TOKENS
    assert len(summary) < 12_000
    assert "- user: Turn 3998." in summary
    assert "- user: Turn 0." not in summary
    assert "earlier points omitted)" in summary
    assert all(s in summary for s in SECTIONS)


def test_extractive_handles_a_plain_prompt_and_an_empty_one():
    summary = extractive_summarizer("Just some text. Nothing structured?")
    assert all(s in summary for s in SECTIONS)
    assert "Just some text." in summary
    assert extractive_summarizer("") == ""


# ── OpenAICompatibleSummarizer against a real local HTTP server ──────────────


class FakeChatServer(ThreadingHTTPServer):
    """A tiny Chat Completions endpoint: records requests, answers with ``reply``."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.requests: list[dict] = []
        self.reply: tuple[int, bytes, str] = (200, completion("SUMMARY"), "application/json")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ChatHandler(BaseHTTPRequestHandler):
    server: FakeChatServer

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
        status, payload, content_type = self.server.reply
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args) -> None:  # keep test output clean
        pass


@pytest.fixture
def chat_server():
    server = FakeChatServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_success_speaks_the_chat_completions_wire_format(chat_server):
    summarizer = OpenAICompatibleSummarizer(chat_server.base_url + "/", model="tiny", api_key="sk-test", timeout=5)
    assert summarizer("Summarise this") == "SUMMARY"
    (request,) = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["body"]["model"] == "tiny"
    assert [m["role"] for m in request["body"]["messages"]] == ["system", "user"]
    assert request["body"]["messages"][1]["content"] == "Summarise this"


def test_list_content_extra_body_and_no_system_prompt(chat_server):
    chat_server.reply = (
        200,
        completion([{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]),
        "application/json",
    )
    summarizer = OpenAICompatibleSummarizer(
        chat_server.base_url, model="m", api_key="k", system_prompt=None, extra_body={"temperature": 0}
    )
    assert summarizer("p") == "AB"
    body = chat_server.requests[0]["body"]
    assert body["messages"] == [{"role": "user", "content": "p"}]
    assert body["temperature"] == 0


def test_async_call_uses_real_http_too(chat_server):
    summarizer = OpenAICompatibleSummarizer(chat_server.base_url, model="m", api_key="k")
    assert asyncio.run(summarizer.acall("p")) == "SUMMARY"
    assert chat_server.requests[0]["body"]["messages"][-1]["content"] == "p"


def test_server_error_raises_summarizer_error(chat_server):
    chat_server.reply = (500, b'{"error": {"message": "overloaded"}}', "application/json")
    summarizer = OpenAICompatibleSummarizer(chat_server.base_url, model="m", api_key="k")
    with pytest.raises(SummarizerError, match="HTTP 500.*overloaded") as caught:
        summarizer("p")
    assert caught.value.status_code == 500
    assert isinstance(caught.value, AgentSessionsError)
    with pytest.raises(SummarizerError, match="HTTP 500"):
        asyncio.run(summarizer.acall("p"))


def test_malformed_json_raises_summarizer_error(chat_server):
    chat_server.reply = (200, b'{"choices": [', "application/json")
    summarizer = OpenAICompatibleSummarizer(chat_server.base_url, model="m", api_key="k")
    with pytest.raises(SummarizerError, match="invalid JSON"):
        summarizer("p")
    with pytest.raises(SummarizerError, match="invalid JSON"):
        asyncio.run(summarizer.acall("p"))


@pytest.mark.parametrize(
    "payload", [b"{}", b'{"choices": []}', json.dumps({"choices": [{"message": {}}]}).encode(), completion(None)]
)
def test_unexpected_json_shape_raises_summarizer_error(chat_server, payload):
    chat_server.reply = (200, payload, "application/json")
    with pytest.raises(SummarizerError):
        OpenAICompatibleSummarizer(chat_server.base_url, model="m", api_key="k")("p")


def test_unreachable_server_raises_summarizer_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    summarizer = OpenAICompatibleSummarizer(f"http://127.0.0.1:{port}/v1", model="m", api_key="k", timeout=2)
    with pytest.raises(SummarizerError, match="failed"):
        summarizer("p")


def test_defaults_come_from_settings_at_call_time(chat_server):
    summarizer = OpenAICompatibleSummarizer()
    with override_settings(
        AGENT_SESSIONS_SUMMARIZER_BASE_URL=chat_server.base_url,
        AGENT_SESSIONS_SUMMARIZER_MODEL="from-settings",
        AGENT_SESSIONS_SUMMARIZER_API_KEY="sk-settings",
    ):
        assert summarizer("p") == "SUMMARY"
    request = chat_server.requests[0]
    assert request["body"]["model"] == "from-settings"
    assert request["headers"]["Authorization"] == "Bearer sk-settings"


def test_builtin_defaults_and_no_key_means_no_authorization(chat_server):
    summarizer = OpenAICompatibleSummarizer()
    assert summarizer.base_url == "https://api.openai.com/v1"
    assert summarizer.model == "gpt-4o-mini"
    assert summarizer.api_key is None
    OpenAICompatibleSummarizer(chat_server.base_url, model="m")("p")
    assert "Authorization" not in chat_server.requests[0]["headers"]
    assert "sk-secret" not in repr(OpenAICompatibleSummarizer(api_key="sk-secret"))


def test_drives_the_compaction_function_on_both_paths(chat_server):
    summarizer = OpenAICompatibleSummarizer(chat_server.base_url, model="m", api_key="k")
    messages = [text(f"m{i}", "user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(6)]
    fn = create_compact_function(summarizer, protect_head=1, tail_token_budget=0, min_tail_messages=1)
    assert fn(messages).summary == "SUMMARY"
    assert asyncio.run(fn.acall(messages)).summary == "SUMMARY"
    assert len(chat_server.requests) == 2
    assert "## Topic" in chat_server.requests[0]["body"]["messages"][-1]["content"]
