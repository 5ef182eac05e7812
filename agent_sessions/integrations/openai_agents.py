"""OpenAI Agents SDK ``Session`` protocol on top of agent_sessions.

``Runner.run(agent, "Hi", session=AgentsSession("chat-1"))`` keeps the run's history
here. Each item the SDK hands over becomes one message row: the raw item is kept
unchanged in a ``data-openai-agents-item`` part (so it comes back exactly as
given), next to a UIMessage rendering of it (text, tool and reasoning parts) that
search, the admin, forks and compaction work on. See ``docs/integrations.md``.
"""

from __future__ import annotations

from typing import Any

from ..asyncutils import run_sync
from ..convert._walk import read_blocks, refusal_block, text_block
from ._extras import require
from ._parts import (
    as_json_text,
    data_part,
    find_data,
    is_tool_part,
    known_call_names,
    new_id,
    parse_json,
    reasoning_part,
    text_part,
    texts,
    tool_call_part,
    tool_name,
    tool_result_part,
)
from ._store import StoredHistory

require("agents", "openai-agents")

from agents.memory.session_settings import (  # noqa: E402
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

ITEM_KIND = "openai-agents-item"
"""Data part ``data-openai-agents-item`` holding the SDK's raw item."""

SOURCE = "openai-agents"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class AgentsSession(StoredHistory):
    """The Agents SDK ``Session`` protocol (async methods), one message row per item.

    ``session_id`` names the agent_sessions session (and its ``assistant_sessions``
    row, created on the first write). ``get_items`` reads the latest branch with
    compaction overlays applied; ``pop_item`` deletes that branch's last row.
    """

    SOURCE = SOURCE

    def __init__(
        self,
        session_id: str,
        *,
        using: str | None = None,
        manager: Any = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        owner: Any = None,
    ) -> None:
        super().__init__(session_id, using=using, manager=manager, owner=owner)
        # As the SDK's own sessions do: a dict (``{"limit": 2}``) becomes ``SessionSettings``, None the
        # default one, so ``Runner`` can ``resolve()`` it and ``get_items`` honours its limit.
        self.session_settings: SessionSettings = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )

    # ── sync core (also handy outside an event loop) ────────────────
    def get_items_sync(self, limit: int | None = None) -> list[dict]:
        """All items of the latest branch in order, or the last ``limit`` (default: ``session_settings.limit``)."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit > 0:
            # Read one row more than asked: if that still yields more than ``limit`` items, the
            # window's first row (where an overlay may have been cut) is not among those returned.
            window, complete = self._store.recent(limit + 1)
            items = _flatten(window)
            if len(items) > limit or complete:
                return items[-limit:]
        elif limit == 0:
            return []
        # No limit, a negative one (everything, as the SDK's SQLiteSession reads it), or a window
        # that compaction overlays or foreign rows made too short.
        items = _flatten(self._store.history())
        return items[-limit:] if limit is not None and limit > 0 else items

    def add_items_sync(self, items: list[Any]) -> None:
        """Append the items, in order, as a chain of rows under the latest leaf (one transaction)."""
        items = [_plain(item) for item in items]
        if not items:
            return
        names: dict[str, str] = {}
        in_batch = _call_ids(items, "function_call")
        earlier = _call_ids(items, "function_call_output") - in_batch
        if earlier:  # results whose calls were stored before: look at the recent rows, then the branch
            names = known_call_names(self._store.recent(64)[0])
            if not earlier <= names.keys():
                names = known_call_names(self._store.history())
        self._store.append([item_to_message(item, names) for item in items])

    def pop_item_sync(self) -> dict | None:
        """Delete the latest row and return its item (None when empty).

        A foreign row that renders as no item (reasoning only, say) is removed and the
        next one is tried, as ``SQLiteSession`` skips rows it cannot decode.
        """
        while (message := self._store.pop_latest()) is not None:
            items = message_to_items(message)
            if items:
                return items[-1]
        return None

    def clear_session_sync(self) -> None:
        """Delete every row and overlay of the session."""
        self._store.clear()

    # ── the SDK protocol ────────────────────────────────────────────
    async def get_items(self, limit: int | None = None) -> list[dict]:
        """The conversation history (latest ``limit`` items when given), oldest first."""
        return await run_sync(self.get_items_sync, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Store new items at the end of the history."""
        await run_sync(self.add_items_sync, list(items))

    async def pop_item(self) -> dict | None:
        """Remove and return the most recent item, or None."""
        return await run_sync(self.pop_item_sync)

    async def clear_session(self) -> None:
        """Remove every item."""
        await run_sync(self.clear_session_sync)


# ── item ⇄ UIMessage ────────────────────────────────────────────────
def item_to_message(item: dict, call_names: dict[str, str] | None = None) -> dict:
    """One SDK item as a UIMessage: its rendering plus the raw item in a data part.

    ``call_names`` maps earlier ``call_id``s to tool names, so a result row is
    labelled with its tool; calls in ``item`` itself are added to it.
    """
    names = call_names if call_names is not None else {}
    kind = item.get("type")
    role = "assistant"
    parts: list[dict] = []
    if kind in (None, "message") and "role" in item:
        given = item.get("role")
        role = _ROLES.get(given, given) if isinstance(given, str) and given else "user"
        parts = _content_parts(item.get("content"))
    elif kind == "function_call":
        call_id, name = str(item.get("call_id") or ""), str(item.get("name") or "function")
        names[call_id] = name
        parts = [tool_call_part(name, call_id, parse_json(item.get("arguments")))]
    elif kind == "function_call_output":
        call_id = str(item.get("call_id") or "")
        role = "tool"
        parts = [tool_result_part(names.get(call_id, "function"), call_id, item.get("output"))]
    elif kind == "reasoning":
        text = "\n".join(_reasoning_texts(item))
        parts = [reasoning_part(text)] if text else []
    elif isinstance(kind, str) and kind.endswith("_output"):
        role = "tool"
    parts.append(data_part(ITEM_KIND, item))
    return {"id": new_id("oaa"), "role": role, "parts": parts}


def message_to_items(message: dict) -> list[dict]:
    """The SDK items of a stored message: its raw item, or a rendering of a foreign one.

    Rows written by this adapter give back their item unchanged. Other rows (a
    compaction summary, messages written through the REST API or another adapter)
    become plain input items: text as a message item, tool parts as
    ``function_call`` (+ ``function_call_output`` when the result is there);
    reasoning and files of foreign rows are not rendered.
    """
    found, item = find_data(message, ITEM_KIND)
    if found:
        return [item]
    role = message.get("role")
    items: list[dict] = []
    text = "\n".join(texts(message))
    if text and role in ("user", "assistant", "system", "developer"):
        items.append({"role": role, "content": text})
    for part in message.get("parts") or []:
        if not is_tool_part(part):
            continue
        call_id = part["toolCallId"]
        if role != "tool" and ("input" in part or "args" in part):
            arguments = as_json_text(part.get("input", part.get("args")))
            items.append(
                {"type": "function_call", "call_id": call_id, "name": tool_name(part, "tool"), "arguments": arguments}
            )
        if "errorText" in part:
            items.append({"type": "function_call_output", "call_id": call_id, "output": str(part["errorText"])})
        elif "output" in part or "result" in part:
            output = as_json_text(part.get("output", part.get("result")))
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
    return items


def _call_ids(items: list[dict], kind: str) -> set[str]:
    return {i["call_id"] for i in items if i.get("type") == kind and isinstance(i.get("call_id"), str)}


def _flatten(messages: list[dict]) -> list[dict]:
    return [item for message in messages for item in message_to_items(message)]


def _plain(item: Any) -> dict:
    """The SDK passes JSON-able dicts; a pydantic item is dumped as the SDK would send it."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    raise TypeError(f"an Agents SDK item must be a dict, not {type(item).__name__}")


def _content_parts(content: Any) -> list[dict]:
    """Text of a message item's content (a string or a list of content parts); files by URL."""
    if isinstance(content, str):
        return [text_part(content)] if content else []
    return read_blocks(content, _READERS) if isinstance(content, list) else []


def _web_image(block: dict) -> dict | None:
    url = block.get("image_url")
    return {"type": "file", "mediaType": "image/*", "url": url} if _is_web_url(url) else None


def _web_file(block: dict) -> dict | None:
    url = block.get("file_url")
    if not _is_web_url(url):
        return None
    part = {"type": "file", "mediaType": "application/octet-stream", "url": url}
    if isinstance(block.get("filename"), str):
        part["filename"] = block["filename"]
    return part


#: Content part type → its UIMessage part (None drops it).
_READERS = {
    "input_text": text_block,
    "output_text": text_block,
    "refusal": refusal_block,
    "input_image": _web_image,
    "input_file": _web_file,
}


def _is_web_url(value: Any) -> bool:
    # Inline (data:) payloads stay only in the raw item, so a row never holds them twice.
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def _reasoning_texts(item: dict) -> list[str]:
    out: list[str] = []
    for key in ("summary", "content"):
        blocks = item.get(key)
        out.extend(
            block["text"]
            for block in (blocks if isinstance(blocks, list) else [])
            if isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"]
        )
    return out
