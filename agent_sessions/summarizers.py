"""Summarisers for :func:`agent_sessions.compaction.create_compact_function`.

``extractive_summarizer`` is deterministic and offline (demo and tests);
``OpenAICompatibleSummarizer`` calls any Chat Completions endpoint (OpenAI, vLLM, Ollama, …).
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from . import conf
from .exceptions import SummarizerError
from .text import clean as clean_text
from .tokens import estimate_string_tokens

__all__ = ["OpenAICompatibleSummarizer", "SummarizerError", "extractive_summarizer"]

_SECTIONS = ("Topic", "Key Points", "Current State", "Open Items")
_DEFAULT_BUDGET = 200
MAX_SUMMARY_TOKENS = 2_000
"""Hard ceiling of an extractive summary, whatever budget the prompt asks for (a 4,000-message range asks for tens
of thousands): a summary is read by people in the admin and by the model on every turn."""
_SECTION_LINES = 5
_SENTENCE_CHARS = 200
_LEAD_MIN_CHARS = 40
_TOOL_NAME = re.compile(r"^\[Tool: (.*)\]$")
_TOOL_LINE = re.compile(r"^(Input|Output|Error): ")
_ROLE_LINE = re.compile(r"^\[([A-Za-z_-]+)\]$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


# ── Extractive (offline) summariser ─────────────────────────────────────────


def _between(text: str, start: str, end: str) -> str | None:
    """The text between the first ``start`` tag and the last ``end`` tag, or None."""
    head = text.find(start)
    tail = text.rfind(end)
    if head < 0 or tail < head:
        return None
    return text[head + len(start) : tail].strip()


def _turns(conversation: str) -> list[tuple[str, str, list[str]]]:
    """(role, text, tool names) of each message quoted as ``[role]`` + body; tool details are left out."""
    turns: list[tuple[str, list[str], list[str]]] = []
    for raw in conversation.splitlines():
        line = raw.strip()
        role = _ROLE_LINE.match(line)
        if role:
            turns.append((role.group(1), [], []))
            continue
        if not line or line == "---" or _TOOL_LINE.match(line):
            continue
        if not turns:
            turns.append(("unknown", [], []))
        tool = _TOOL_NAME.match(line)
        (turns[-1][2] if tool else turns[-1][1]).append(tool.group(1) if tool else line)
    return [(role, " ".join(lines), tools) for role, lines, tools in turns if lines or tools]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _clip(sentence: str) -> str:
    return sentence if len(sentence) <= _SENTENCE_CHARS else sentence[: _SENTENCE_CHARS - 1].rstrip() + "…"


def _lead(text: str) -> str:
    """The first sentence(s) of ``text``: enough to reach a few words, clipped to one line."""
    lead = ""
    for sentence in _sentences(text):
        lead = f"{lead} {sentence}".strip()
        if len(lead) >= _LEAD_MIN_CHARS:
            break
    return _clip(lead)


def _gist(text: str, tools: list[str]) -> str:
    """What a message said (its lead) and which tools it used."""
    used = f"(used {', '.join(_unique(tools))})" if tools else ""
    return " ".join(x for x in (_lead(text), used) if x)


def _summary_sections(summary: str) -> dict[str, list[str]]:
    """Lines under each ``## Section`` heading of a previous summary."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return sections


def _budget(prompt: str) -> int:
    match = re.search(r"~\s*(\d+)\s*tokens", prompt)
    return int(match.group(1)) if match else _DEFAULT_BUDGET


def _render(sections: dict[str, list[str]]) -> str:
    return "\n\n".join(f"## {name}\n" + "\n".join(sections[name]) for name in _SECTIONS)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def extractive_summarizer(prompt: str) -> str:
    """Deterministic, network-free summary of a compaction prompt, for demos and tests.

    Takes the first sentence of each quoted message, fills the four sections and drops the
    oldest key points until the result fits the prompt's ``~N tokens`` target, capped at
    :data:`MAX_SUMMARY_TOKENS` however long the range.
    """
    previous = _summary_sections(_between(prompt, "<previous_summary>", "</previous_summary>") or "")
    conversation = _between(prompt, "<conversation>", "</conversation>")
    turns = _turns(prompt if conversation is None else conversation)
    if not turns and not previous:
        return ""
    user_turns = [text for role, text, _ in turns if role == "user" and text] or [t for _, t, _ in turns if t]
    topic = previous.get("Topic") or ([f"- {_lead(user_turns[0])}"] if user_turns else [])
    points = _unique(previous.get("Key Points", []) + [f"- {role}: {_gist(t, tools)}" for role, t, tools in turns])
    state = [f"- Last message ({turns[-1][0]}): {_gist(*turns[-1][1:])}"] if turns else []
    questions = [f"- {_clip(s)}" for text in user_turns[-3:] for s in _sentences(text) if s.endswith(("?", "？"))]
    sections = {
        "Topic": topic or ["- (not stated)"],
        "Key Points": points or ["- (none)"],
        "Current State": state or previous.get("Current State") or ["- (unknown)"],
        "Open Items": _unique(questions) or ["- None noted."],
    }
    for name in ("Topic", "Current State", "Open Items"):
        sections[name] = sections[name][-_SECTION_LINES:] if name == "Open Items" else sections[name][:_SECTION_LINES]
    # The prompt quotes stored messages (a binary tool output): no NUL or lone surrogate is echoed.
    return clean_text(_fit(sections, min(_budget(prompt), MAX_SUMMARY_TOKENS)))


def _fit(sections: dict[str, list[str]], budget: int) -> str:
    """Render with as many of the newest key points as fit ``budget`` (at least one); a note counts the rest."""
    points = sections["Key Points"]

    def render(kept: int) -> str:
        dropped = len(points) - kept
        note = [f"- ({dropped} earlier point{'s' if dropped > 1 else ''} omitted)"] if dropped else []
        return _render({**sections, "Key Points": note + points[len(points) - kept :]})

    low, high = 1, len(points)  # binary search: the largest count that fits (one point always stays)
    if estimate_string_tokens(render(high)) <= budget:
        return render(high)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_string_tokens(render(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return render(low)


# ── OpenAI-compatible (Chat Completions) summariser ────────────────────────

DEFAULT_SYSTEM_PROMPT = (
    "You summarize conversations between a user and an AI assistant so that the summary can replace "
    "the original messages. Follow the requested structure exactly."
)


class OpenAICompatibleSummarizer:
    """``summarize(prompt) -> str`` over an OpenAI-compatible ``POST {base_url}/chat/completions``.

    Unset arguments fall back, at call time, to the ``AGENT_SESSIONS_SUMMARIZER_*`` settings.
    Call it synchronously, or ``await summarizer.acall(prompt)`` in async code.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60,
        *,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self._base_url = base_url
        self._model = model
        self._api_key = api_key
        self.timeout = timeout
        self.system_prompt = system_prompt
        self.extra_body = dict(extra_body or {})

    def __repr__(self) -> str:  # never shows the API key
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def base_url(self) -> str:
        return (self._base_url or conf.summarizer_base_url()).rstrip("/")

    @property
    def model(self) -> str:
        return self._model or conf.summarizer_model()

    @property
    def api_key(self) -> str | None:
        return self._api_key if self._api_key is not None else conf.summarizer_api_key()

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def __call__(self, prompt: str) -> str:
        """Send ``prompt`` as the user message and return the assistant's text."""
        try:
            with httpx.Client(timeout=self.timeout) as client:
                response = client.post(self.endpoint, json=self._payload(prompt), headers=self._headers())
        except httpx.HTTPError as exc:
            raise SummarizerError(f"summarizer request to {self.endpoint} failed: {exc}") from exc
        return self._parse(response)

    async def acall(self, prompt: str) -> str:
        """Async twin of ``__call__``."""
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(self.endpoint, json=self._payload(prompt), headers=self._headers())
        except httpx.HTTPError as exc:
            raise SummarizerError(f"summarizer request to {self.endpoint} failed: {exc}") from exc
        return self._parse(response)

    def _payload(self, prompt: str) -> dict[str, Any]:
        # A lone surrogate (quoted from a foreign row) cannot be encoded as UTF-8 for the request.
        messages = [{"role": "user", "content": clean_text(prompt)}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return {**self.extra_body, "model": self.model, "messages": messages}

    def _headers(self) -> dict[str, str]:
        key = self.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _parse(self, response: httpx.Response) -> str:
        """The first choice's message text; SummarizerError on an HTTP error or an unexpected body."""
        if response.status_code >= 400:
            body = response.text[:300]
            raise SummarizerError(
                f"summarizer endpoint {self.endpoint} returned HTTP {response.status_code}: {body}",
                status_code=response.status_code,
            )
        try:
            data = response.json()
        except ValueError as exc:
            raise SummarizerError(f"summarizer endpoint {self.endpoint} returned invalid JSON: {exc}") from exc
        return clean_text(_message_text(data, self.endpoint))


def _message_text(data: Any, endpoint: str) -> str:
    """``choices[0].message.content`` as text (string content, or a list of text parts)."""
    try:
        message = data["choices"][0]["message"]
        content = message["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise SummarizerError(f"summarizer endpoint {endpoint} returned no choices[0].message.content") from exc
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    refusal = message.get("refusal") if isinstance(message, dict) else None
    detail = f" (refusal: {refusal})" if refusal else ""
    raise SummarizerError(f"summarizer endpoint {endpoint} returned no text content{detail}")
