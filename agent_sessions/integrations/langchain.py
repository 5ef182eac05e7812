"""LangChain ``BaseChatMessageHistory`` on top of agent_sessions.

``DjangoChatMessageHistory("chat-1")`` works wherever langchain-core takes a chat
history (``RunnableWithMessageHistory``, hand-written loops). Each LangChain
message becomes one message row: the message itself is kept in a
``data-langchain-message`` part (type, content, ``tool_calls``,
``additional_kwargs``, ``response_metadata``, ids, everything) next to a UIMessage
rendering for search, the admin, forks and compaction. See ``docs/integrations.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..asyncutils import run_sync
from ._extras import require
from ._parts import (
    as_json_text,
    data_part,
    find_data,
    is_tool_part,
    known_call_names,
    new_id,
    reasoning_part,
    text_part,
    texts,
    tool_call_part,
    tool_name,
    tool_result_part,
)
from ._store import StoredHistory

require("langchain_core", "langchain")

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

MESSAGE_KIND = "langchain-message"
"""Data part ``data-langchain-message`` holding ``{"type", "data"}`` as ``messages_from_dict`` reads it."""

SOURCE = "langchain"
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}
_CHUNKS = {
    f"{name}MessageChunk": kind
    for name, kind in [
        ("AI", "ai"),
        ("Human", "human"),
        ("System", "system"),
        ("Tool", "tool"),
        ("Function", "function"),
        ("Chat", "chat"),
    ]
}


class DjangoChatMessageHistory(StoredHistory, BaseChatMessageHistory):
    """A chat history stored as one message row per LangChain message, sync and async.

    ``messages`` is the latest branch with compaction overlays applied; rows written
    elsewhere (overlays, the REST API) are rendered as plain LangChain messages.
    """

    SOURCE = SOURCE

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The conversation, oldest first."""
        return [m for message in self._store.history() for m in to_langchain(message)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages in order as a chain of rows, in one transaction."""
        messages = list(messages)
        for message in messages:
            if not isinstance(message, BaseMessage):
                raise TypeError(f"expected a LangChain BaseMessage, not {type(message).__name__}")
        names: dict[str, str] = {}
        in_batch = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
        earlier = {m.tool_call_id for m in messages if isinstance(m, ToolMessage) and not m.name} - in_batch
        if earlier:  # results whose calls were stored before: look at the recent rows, then the branch
            names = known_call_names(self._store.recent(64)[0])
            if not earlier <= names.keys():
                names = known_call_names(self._store.history())
        self._store.append([from_langchain(m, names) for m in messages])

    def clear(self) -> None:
        """Delete every message and overlay of the session."""
        self._store.clear()

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of :attr:`messages` (runs in a database thread)."""
        return await run_sync(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async twin of :meth:`add_messages`."""
        await run_sync(self.add_messages, list(messages))

    async def aclear(self) -> None:
        """Async twin of :meth:`clear`."""
        await run_sync(self.clear)


# ── LangChain message ⇄ UIMessage ───────────────────────────────────
def from_langchain(message: BaseMessage, call_names: dict[str, str] | None = None) -> dict:
    """One LangChain message as a UIMessage: a rendering plus the message itself in a data part."""
    names = call_names if call_names is not None else {}
    kind = _CHUNKS.get(message.type, message.type)
    role = _ROLES.get(kind) or str(getattr(message, "role", "") or "assistant")
    parts: list[dict] = []
    if kind == "tool":
        call_id = str(getattr(message, "tool_call_id", "") or "")
        name = message.name or names.get(call_id, "tool")
        if getattr(message, "status", "success") == "error":
            parts.append(tool_result_part(name, call_id, error=_content_text(message.content)))
        else:
            parts.append(tool_result_part(name, call_id, _plain_output(message.content)))
    else:
        parts.extend(_content_parts(message))
        for call in getattr(message, "tool_calls", None) or []:
            names[str(call.get("id") or "")] = call["name"]
            parts.append(tool_call_part(call["name"], str(call.get("id") or ""), call.get("args", {})))
        for bad in getattr(message, "invalid_tool_calls", None) or []:
            part = tool_call_part(str(bad.get("name") or "tool"), str(bad.get("id") or ""), bad.get("args"))
            part.update(state="output-error", errorText=str(bad.get("error") or "invalid tool call"))
            parts.append(part)
    parts.append(data_part(MESSAGE_KIND, message_to_dict(message)))
    return {"id": new_id("lc"), "role": role, "parts": parts}


def to_langchain(message: dict) -> list[BaseMessage]:
    """The LangChain messages of a stored row: the stored one, or a rendering of a foreign row.

    A foreign row becomes Human/AI/System messages from its text (the UIMessage id as ``id``);
    an assistant row becomes one AIMessage per step (``tool_calls`` for its answered calls) and
    one ToolMessage per result right after it (errors with ``status="error"``); calls without a
    result are left out. Its reasoning and files are not rendered.
    """
    found, stored = find_data(message, MESSAGE_KIND)
    if found:
        return [rebuild(stored)]
    role, mid = message.get("role"), message.get("id")
    text = "\n".join(texts(message))
    parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
    if role == "user":
        return [HumanMessage(content=text, id=mid)]
    if role == "system":
        return [SystemMessage(content=text, id=mid)]
    if role == "tool":
        return _tool_messages([p for p in parts if is_tool_part(p)])
    # One AIMessage per step (split at step-start), its ToolMessages right after it, so text
    # written after a result comes after it; calls still waiting for a result are left out.
    out: list[BaseMessage] = []
    steps: list[list[dict]] = [[]]
    for part in parts:
        if part.get("type") == "step-start":
            steps.append([])
        else:
            steps[-1].append(part)
    steps = [step for step in steps if step] or [[]]
    for index, step in enumerate(steps):
        answered = [p for p in step if is_tool_part(p) and _answered(p) and ("input" in p or "args" in p)]
        step_text = "\n".join(p["text"] for p in step if p.get("type") == "text" and isinstance(p.get("text"), str))
        if not step_text and not answered and len(steps) > 1:
            continue
        calls = [
            {
                "name": tool_name(p, "tool"),
                "args": _args(p.get("input", p.get("args"))),
                "id": p["toolCallId"],
                "type": "tool_call",
            }
            for p in answered
        ]
        out.append(AIMessage(content=step_text, tool_calls=calls, id=mid if index == 0 else f"{mid}-{index}"))
        out.extend(_tool_messages(answered))
    return out


def _answered(part: dict) -> bool:
    return "errorText" in part or "output" in part or "result" in part


def _tool_messages(tool_parts: list[dict]) -> list[BaseMessage]:
    """One ToolMessage per result among ``tool_parts`` (errors with ``status="error"``)."""
    out: list[BaseMessage] = []
    for part in tool_parts:
        if "errorText" in part:
            out.append(
                ToolMessage(
                    content=str(part["errorText"]),
                    tool_call_id=part["toolCallId"],
                    name=tool_name(part, "tool"),
                    status="error",
                )
            )
        elif "output" in part or "result" in part:
            output = as_json_text(part.get("output", part.get("result")))
            out.append(ToolMessage(content=output, tool_call_id=part["toolCallId"], name=tool_name(part, "tool")))
    return out


def rebuild(stored: Any) -> BaseMessage:
    """The LangChain message of a stored ``{"type", "data"}`` dict, equal to what ``messages_from_dict`` gives.

    A dump this adapter wrote (``message_to_dict`` of a validated message: every field present,
    of its declared type, tool calls already normalised) is rebuilt with ``model_construct``,
    skipping pydantic validation and LangChain's validators, which would change nothing and cost
    three quarters of the read. Anything else, edited rows included, goes through
    ``messages_from_dict`` and its validation (and errors).
    """
    if isinstance(stored, dict):
        cls = _REBUILT.get(str(stored.get("type")))
        data = stored.get("data")
        if cls is not None and isinstance(data, dict) and _as_dumped(cls, data, stored["type"]):
            return cls.model_construct(**data)
    return messages_from_dict([stored])[0]


_REBUILT: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
}
_FIELDS = {cls: frozenset(cls.model_fields) for cls in _REBUILT.values()}
_CALL_KEYS = frozenset({"name", "args", "id", "type"})
_INVALID_CALL_KEYS = frozenset({"name", "args", "id", "error", "type"})


def _as_dumped(cls: type[BaseMessage], data: dict, kind: str) -> bool:
    """Whether ``data`` has exactly the shape ``model_dump`` gives, so validation would be a no-op."""
    if data.keys() != _FIELDS[cls] or data["type"] != kind:
        return False
    content, name, message_id = data["content"], data["name"], data["id"]
    if type(content) is not str and not (type(content) is list and all(isinstance(c, str | dict) for c in content)):
        return False
    if type(data["additional_kwargs"]) is not dict or type(data["response_metadata"]) is not dict:
        return False
    if (name is not None and type(name) is not str) or (message_id is not None and type(message_id) is not str):
        return False
    if cls is ToolMessage:
        return type(data["tool_call_id"]) is str and data["status"] in ("success", "error")
    if cls is AIMessage:
        calls, invalid, usage = data["tool_calls"], data["invalid_tool_calls"], data["usage_metadata"]
        if type(calls) is not list or type(invalid) is not list or (usage is not None and type(usage) is not dict):
            return False
        if not calls and not invalid and data["additional_kwargs"].get("tool_calls"):
            return False  # validation would parse these legacy tool calls
        return all(_is_call(c, _CALL_KEYS, "tool_call") and type(c["args"]) is dict for c in calls) and all(
            _is_call(c, _INVALID_CALL_KEYS, "invalid_tool_call") for c in invalid
        )
    return True


def _is_call(call: Any, keys: frozenset, kind: str) -> bool:
    return (
        isinstance(call, dict)
        and call.keys() == keys
        and call["type"] == kind
        and (call["name"] is None or isinstance(call["name"], str))
        and (call["id"] is None or isinstance(call["id"], str))
    )


def _content_parts(message: BaseMessage) -> list[dict]:
    """Text and reasoning of a message's content (a string or a list of content blocks)."""
    parts: list[dict] = []
    extra = getattr(message, "additional_kwargs", None) or {}
    if isinstance(extra.get("reasoning_content"), str) and extra["reasoning_content"]:
        parts.append(reasoning_part(extra["reasoning_content"]))
    content = message.content
    if isinstance(content, str):
        return parts + ([text_part(content)] if content else [])
    for block in content:
        if isinstance(block, str):
            parts.append(text_part(block))
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(text_part(block["text"]))
            elif kind in ("reasoning", "thinking"):
                value = block.get(kind)
                if isinstance(value, str) and value:
                    parts.append(reasoning_part(value))
    return parts


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, str | dict))


def _plain_output(content: Any) -> Any:
    """A ToolMessage's content as the tool part's output (strings stay strings)."""
    return content if isinstance(content, str) else _content_text(content)


def _args(value: Any) -> dict:
    """LangChain tool calls take a dict of arguments; anything else is wrapped."""
    return value if isinstance(value, dict) else {"input": value}
