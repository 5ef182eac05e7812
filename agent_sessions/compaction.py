"""Reference compaction function and its helpers.

Tool vocabulary used by the pairing helpers, covering AI SDK ``UIMessage`` parts and
the older/model-message shapes:

* a *tool part* is a dict part that carries a ``toolCallId`` (``type`` "tool-<name>",
  "dynamic-tool", "tool-call", "tool-result", or an AI SDK v4 "tool-invocation" part whose
  ``toolInvocation`` holds the id);
* a tool part *holds a result* when it has ``output``, ``result`` or ``errorText``, or its
  ``state`` is "output-available", "output-error", "output-denied" or "result";
* a tool part is *result-only* when it sits in a ``role == "tool"`` message or its
  ``type`` is "tool-result"; every other tool part is a *call*.

In ``UIMessage`` a call and its result usually live in one part (a call that holds its own
result is complete on its own). Otherwise a call without a result is paired with the next
part carrying the same id that holds a result (a role "tool" message, or a later copy of
the part in "output-available" state). Pairing is sequential, so providers that reuse ids
(``call_0`` on every step) are handled.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from .asyncutils import is_async_callable, resolve
from .tokens import estimate_message_tokens, estimate_one_message_tokens
from .types import COMPACTION_PREFIX, CompactResult, TokenCounterInput, is_finite_number

__all__ = [
    "COMPACTION_PREFIX",
    "CompactContext",
    "CompactFunction",
    "align_boundary_backward",
    "align_boundary_forward",
    "build_summary_prompt",
    "compute_summary_budget",
    "create_compact_function",
    "find_tail_cut_by_tokens",
    "is_compaction_message",
    "sanitize_tool_pairs",
]

Message = dict[str, Any]
Position = tuple[int, int]  # (message index, part index)
MessageCounter = Callable[[list[Message]], "int | float | Awaitable[int | float]"]

_RESULT_STATES = {"output-available", "output-error", "output-denied", "result"}
_RESULT_KEYS = ("output", "result", "errorText")
_TOOL_SNIPPET_CHARS = 500


@dataclass(frozen=True)
class CompactContext:
    """What a session hands its compaction function: its own token counter, if any.

    ``token_counter`` is the session's ``compact_after`` counter, called as
    ``token_counter(TokenCounterInput(messages, system_prompt, context_blocks))``; sync or async.
    """

    token_counter: Callable[[TokenCounterInput], Any] | None = None


# ── Messages and tool parts ─────────────────────────────────────────────────


def is_compaction_message(message: Message) -> bool:
    """True for a synthetic overlay message (its id starts with ``COMPACTION_PREFIX``)."""
    msg_id = message.get("id") if isinstance(message, dict) else None
    return isinstance(msg_id, str) and msg_id.startswith(COMPACTION_PREFIX)


def _parts(message: Message) -> list[Any]:
    parts = message.get("parts") if isinstance(message, dict) else None
    return parts if isinstance(parts, list) else []


def _tool_call_id(part: Any) -> str | None:
    if not isinstance(part, dict):
        return None
    call_id = part.get("toolCallId")
    if call_id is None and isinstance(part.get("toolInvocation"), dict):
        call_id = part["toolInvocation"].get("toolCallId")
    return call_id if isinstance(call_id, str) and call_id else None


def _tool_body(part: dict) -> dict:
    """Where a tool part keeps its fields: the part itself, or its legacy ``toolInvocation``."""
    invocation = part.get("toolInvocation")
    return invocation if isinstance(invocation, dict) else part


def _holds_result(part: dict) -> bool:
    body = _tool_body(part)
    return body.get("state") in _RESULT_STATES or any(key in body for key in _RESULT_KEYS)


def _is_result_only(message: Message, part: dict) -> bool:
    return message.get("role") == "tool" or part.get("type") == "tool-result"


def _match_tool_parts(messages: list[Message]) -> tuple[list[tuple[Position, Position]], set[Position]]:
    """Pair calls with their results in order; return (pairs, positions of unmatched parts)."""
    pairs: list[tuple[Position, Position]] = []
    unmatched: set[Position] = set()
    open_calls: dict[str, Position] = {}
    for i, message in enumerate(messages):
        for j, part in enumerate(_parts(message)):
            call_id = _tool_call_id(part)
            if call_id is None:
                continue
            result_only = _is_result_only(message, part)
            if result_only or _holds_result(part):
                if call_id in open_calls:
                    pairs.append((open_calls.pop(call_id), (i, j)))
                elif result_only:
                    unmatched.add((i, j))  # orphan result: its call is not in this history
            else:
                if call_id in open_calls:
                    unmatched.add(open_calls[call_id])  # id reused before the first call got a result
                open_calls[call_id] = (i, j)
    unmatched.update(open_calls.values())  # calls still waiting for a result
    return pairs, unmatched


def _tool_spans(messages: list[Message]) -> list[tuple[int, int]]:
    """Message-index spans (call message, result message) that a cut must not split."""
    pairs, _ = _match_tool_parts(messages)
    return [(call[0], result[0]) for call, result in pairs if call[0] < result[0]]


def sanitize_tool_pairs(messages: list[Message]) -> list[Message]:
    """Drop calls that have no result and results that have no call, so a provider never sees one.

    Complete ``UIMessage`` tool parts (call and output in one part) are kept. A message emptied by
    the removal is dropped; other messages are returned as they are. The input is not mutated.
    """
    _, unmatched = _match_tool_parts(messages)
    if not unmatched:
        return list(messages)
    cleaned: list[Message] = []
    for i, message in enumerate(messages):
        parts = _parts(message)
        kept = [part for j, part in enumerate(parts) if (i, j) not in unmatched]
        if len(kept) == len(parts):
            cleaned.append(message)
        elif kept:
            cleaned.append({**message, "parts": kept})
    return cleaned


# ── Boundaries ───────────────────────────────────────────────────────────────


def _clamp(messages: list[Message], index: int) -> int:
    return max(0, min(int(index), len(messages)))


def align_boundary_forward(messages: list[Message], index: int) -> int:
    """Move a cut (``messages[:index] | messages[index:]``) later until no tool pair straddles it."""
    index = _clamp(messages, index)
    spans = _tool_spans(messages)
    while True:
        crossing = [end for start, end in spans if start < index <= end]
        if not crossing:
            return index
        index = max(crossing) + 1


def align_boundary_backward(messages: list[Message], index: int) -> int:
    """Move a cut earlier until no tool pair straddles it (the call joins the side of its results)."""
    index = _clamp(messages, index)
    spans = _tool_spans(messages)
    while True:
        crossing = [start for start, end in spans if start < index <= end]
        if not crossing:
            return index
        index = min(crossing)


def _as_tokens(value: Any) -> float:
    """A counter's answer as a token count; non-finite, negative or non-numeric answers count as 0."""
    return float(value) if is_finite_number(value) and value > 0 else 0.0


@dataclass(frozen=True)
class _Count:
    """A request to the driver: the tokens of one message."""

    message: Message


@dataclass(frozen=True)
class _Summarize:
    """A request to the driver: the summary for a prompt."""

    prompt: str


def _tail_walk(
    messages: list[Message], head_end: int, tail_token_budget: float, min_tail_messages: int
) -> Generator[_Count, Any, int]:
    """Walk back from the end, asking the driver for each message's tokens; return the tail cut."""
    n = len(messages)
    head_end = _clamp(messages, head_end)
    used = 0.0
    cut = n
    for i in range(n - 1, head_end - 1, -1):
        tokens = _as_tokens((yield _Count(messages[i])))
        if used + tokens > tail_token_budget and cut < n:
            break  # over budget, and the newest message is already protected
        used += tokens
        cut = i
    min_cut = n - max(0, int(min_tail_messages))
    if min_cut >= head_end:
        cut = min(cut, min_cut)
    return align_boundary_backward(messages, cut)


def find_tail_cut_by_tokens(
    messages: list[Message],
    head_end: int,
    tail_token_budget: int = 20000,
    min_tail_messages: int = 2,
    *,
    token_counter: MessageCounter | None = None,
) -> int:
    """Index where the protected tail starts: walk back from the end while the tail fits the budget.

    The newest message and at least ``min_tail_messages`` are always protected (when the head
    leaves room), and the cut is aligned backward so tool pairs stay together. ``token_counter``
    (``counter([message]) -> int``, sync or async) replaces the built-in estimate.
    """
    walk = _tail_walk(messages, head_end, tail_token_budget, min_tail_messages)
    if token_counter is None:
        return _drive_sync(walk, lambda request: estimate_one_message_tokens(request.message))
    return _drive_sync(walk, lambda request: resolve(token_counter([request.message])))


# ── Summary prompt ───────────────────────────────────────────────────────────


def compute_summary_budget(messages: list[Message]) -> int:
    """Target summary size: ``max(100, 20 %)`` of the estimated tokens of the messages it replaces."""
    return max(100, estimate_message_tokens(messages) // 5)


def _snippet(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _TOOL_SNIPPET_CHARS else text[:_TOOL_SNIPPET_CHARS] + "…"


def _tool_name(part: dict) -> str:
    name = part.get("toolName") or _tool_body(part).get("toolName")
    kind = part.get("type")
    if not name and isinstance(kind, str) and kind.startswith("tool-") and kind not in {"tool-call", "tool-result"}:
        name = kind.removeprefix("tool-")
    return str(name or "unknown")


def _render_tool_part(part: dict) -> str:
    body = _tool_body(part)
    lines = [f"[Tool: {_tool_name(part)}]"]
    tool_input = body.get("input", body.get("args"))
    if tool_input not in (None, "", {}, []):
        lines.append(f"Input: {_snippet(tool_input)}")
    output = body.get("output", body.get("result"))
    if output not in (None, ""):
        lines.append(f"Output: {_snippet(output)}")
    if body.get("errorText"):
        lines.append(f"Error: {_snippet(body['errorText'])}")
    return "\n".join(lines)


def _render_message(message: Message) -> str:
    lines = [f"[{message.get('role', 'unknown')}]"]
    for part in _parts(message):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            lines.append(part["text"])
        elif _tool_call_id(part) is not None or str(part.get("type", "")).startswith("tool-"):
            lines.append(_render_tool_part(part))
    return "\n".join(lines)


_SUMMARY_SECTIONS = """## Topic
[What the conversation is about]

## Key Points
[Important facts, decisions and conclusions]

## Current State
[What has been done and what is in progress]

## Open Items
[Unanswered questions, pending tasks and next steps]"""

_FRESH_INTRO = (
    "Summarize the conversation below. The summary will replace these messages in the model's "
    "context, so keep everything needed to continue the conversation."
)
_UPDATE_INTRO = (
    "Update an existing conversation summary. The previous summary covers earlier turns; the new "
    "turns below happened after it. Keep what is still relevant, add what is new, and remove "
    "something only when it is clearly obsolete."
)


def build_summary_prompt(messages: list[Message], previous_summary: str | None, budget: int) -> str:
    """The structured summarisation prompt (Topic / Key Points / Current State / Open Items).

    With a non-empty ``previous_summary`` it is the update form, which quotes that summary.
    """
    conversation = "\n\n---\n\n".join(_render_message(m) for m in messages)
    blocks = [_UPDATE_INTRO if previous_summary else _FRESH_INTRO]
    if previous_summary:
        blocks.append(f"<previous_summary>\n{previous_summary}\n</previous_summary>")
    blocks.append(f"<conversation>\n{conversation}\n</conversation>")
    blocks.append(f"Write the {'updated ' if previous_summary else ''}summary with exactly these sections:")
    blocks.append(_SUMMARY_SECTIONS)
    blocks.append(
        f"Target ~{budget} tokens. Be factual: include only what the conversation states, and do not "
        "invent file paths, commands or details. Reply with the summary body only."
    )
    return "\n\n".join(blocks)


def _text_parts(message: Message) -> list[str]:
    return [p["text"] for p in _parts(message) if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _previous_summary(messages: list[Message]) -> str | None:
    """Text of the overlay messages already in the history (joined in order), or None."""
    texts = []
    for message in messages:
        if is_compaction_message(message):
            text = "\n".join(_text_parts(message))
            if text.strip():
                texts.append(text.strip())
    return "\n\n".join(texts) or None


# ── Driving the algorithm (a generator of requests) ─────────────────────────


def _drive_sync(gen: Generator[Any, Any, Any], handle: Callable[[Any], Any]) -> Any:
    """Run a request/response generator, answering each request with ``handle``."""
    try:
        request = next(gen)
        while True:
            request = gen.send(handle(request))
    except StopIteration as stop:
        return stop.value


async def _drive_async(gen: Generator[Any, Any, Any], handle: Callable[[Any], Awaitable[Any]]) -> Any:
    """Async twin of :func:`_drive_sync`."""
    try:
        request = next(gen)
        while True:
            request = gen.send(await handle(request))
    except StopIteration as stop:
        return stop.value


# ── The reference compaction function ───────────────────────────────────────


class CompactFunction:
    """The callable returned by :func:`create_compact_function`.

    ``fn(messages, context=None)`` is synchronous and returns ``CompactResult | None``; when a
    callback is a coroutine function the whole run goes through ``async_to_sync`` (so do not call it
    from inside a running event loop). ``await fn.acall(messages, context=None)`` is the async path:
    async callbacks are awaited, a summariser's ``acall`` is preferred, and a sync summariser runs
    in a worker thread (``sync_to_async``) so it does not block the loop.
    """

    def __init__(
        self,
        summarize: Callable[[str], Any],
        *,
        protect_head: int = 3,
        tail_token_budget: int = 20000,
        min_tail_messages: int = 2,
        token_counter: MessageCounter | None = None,
    ) -> None:
        if not callable(summarize):
            raise TypeError("summarize must be callable: summarize(prompt) -> str")
        self.summarize = summarize
        self.protect_head = max(0, int(protect_head))
        self.tail_token_budget = tail_token_budget
        self.min_tail_messages = max(0, int(min_tail_messages))
        self.token_counter = token_counter

    def __call__(self, messages: list[Message], context: CompactContext | None = None) -> CompactResult | None:
        """Compute the overlay for ``messages`` synchronously (None when there is nothing to compact)."""
        counter = self._counter(context)
        if is_async_callable(self.summarize) or getattr(counter, "is_async", False):
            return async_to_sync(self.acall)(messages, context)
        return _drive_sync(self._plan(list(messages)), lambda request: self._answer_sync(request, counter))

    async def acall(self, messages: list[Message], context: CompactContext | None = None) -> CompactResult | None:
        """Async twin of ``__call__``."""
        counter = self._counter(context)

        async def answer(request: _Count | _Summarize) -> Any:
            return await self._answer_async(request, counter)

        return await _drive_async(self._plan(list(messages)), answer)

    def _counter(self, context: CompactContext | None) -> Callable[[Message], Any] | None:
        """Per-message counter: the explicit one, else the session's (from ``context``), else None."""
        if self.token_counter is not None:
            return _PerMessage(self.token_counter)
        session_counter = getattr(context, "token_counter", None)
        if session_counter is not None:
            return _SessionPerMessage(session_counter)
        return None

    def _answer_sync(self, request: _Count | _Summarize, counter: Callable[[Message], Any] | None) -> Any:
        if isinstance(request, _Summarize):
            return resolve(self.summarize(request.prompt))
        if counter is None:
            return estimate_one_message_tokens(request.message)
        return resolve(counter(request.message))

    async def _answer_async(self, request: _Count | _Summarize, counter: Callable[[Message], Any] | None) -> Any:
        if isinstance(request, _Count):
            if counter is None:
                return estimate_one_message_tokens(request.message)
            value = counter(request.message)
            return await value if inspect.isawaitable(value) else value
        acall = getattr(self.summarize, "acall", None)
        if callable(acall):
            value = acall(request.prompt)
        elif is_async_callable(self.summarize):
            value = self.summarize(request.prompt)
        else:
            value = await sync_to_async(self.summarize)(request.prompt)
        return await value if inspect.isawaitable(value) else value

    def _plan(self, messages: list[Message]) -> Generator[_Count | _Summarize, Any, CompactResult | None]:
        """The algorithm, as a generator that asks its driver for token counts and the summary."""
        if len(messages) <= self.protect_head + self.min_tail_messages:
            return None
        start = align_boundary_forward(messages, self.protect_head)
        walk = _tail_walk(messages, start, self.tail_token_budget, self.min_tail_messages)
        end = yield from walk
        if end <= start:
            return None
        middle = messages[start:end]
        new_turns = [m for m in middle if not is_compaction_message(m)]
        if not new_turns:
            return None
        previous = _previous_summary(messages)
        prompt = build_summary_prompt(new_turns, previous, compute_summary_budget(new_turns))
        summary = yield _Summarize(prompt)
        if summary is None:
            return None
        if not isinstance(summary, str):
            raise TypeError(f"summarize() must return a str, not {type(summary).__name__}")
        if not summary.strip():
            return None
        return CompactResult(from_message_id=middle[0]["id"], to_message_id=middle[-1]["id"], summary=summary)


class _PerMessage:
    """Call a ``counter(messages)`` with a one-element list."""

    def __init__(self, counter: MessageCounter) -> None:
        self.counter = counter
        self.is_async = is_async_callable(counter)

    def __call__(self, message: Message) -> Any:
        return self.counter([message])


class _SessionPerMessage:
    """Call a session counter (``TokenCounterInput``-shaped) for one message, without prompt or blocks."""

    def __init__(self, counter: Callable[[TokenCounterInput], Any]) -> None:
        self.counter = counter
        self.is_async = is_async_callable(counter)

    def __call__(self, message: Message) -> Any:
        return self.counter(TokenCounterInput(messages=[message], system_prompt="", context_blocks=[]))


def create_compact_function(
    summarize: Callable[[str], Any],
    *,
    protect_head: int = 3,
    tail_token_budget: int = 20000,
    min_tail_messages: int = 2,
    token_counter: MessageCounter | None = None,
) -> CompactFunction:
    """Build the reference compaction function: keep head and tail, summarise the middle.

    ``summarize(prompt) -> str`` and ``token_counter(messages) -> int`` may be sync or async. The
    result is callable as ``fn(messages, context=None)`` and, in async code, ``await fn.acall(...)``.
    """
    return CompactFunction(
        summarize,
        protect_head=protect_head,
        tail_token_budget=tail_token_budget,
        min_tail_messages=min_tail_messages,
        token_counter=token_counter,
    )
