"""Rebuild the assistant ``UIMessage`` from UI message stream chunks, as the AI SDK client does.

The client (``processUIMessageStream`` in the ``ai`` package) turns the same chunks into the
message it shows; :class:`ReplyBuilder` applies them the same way so the stored reply equals it:
text and reasoning parts, tool parts and their states, step boundaries, sources, files, data
parts (transient ones are not kept) and message metadata (deep-merged).
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

_TOOL_PART_KEYS = ("title", "toolMetadata", "providerExecuted")


def merge_metadata(base: Any, extra: Any) -> Any:
    """``extra`` merged into ``base``: objects key by key (recursively), anything else replaced."""
    if extra is None:
        return base
    if not isinstance(base, dict) or not isinstance(extra, dict):
        return copy.deepcopy(extra)
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = merge_metadata(merged.get(key), value) if isinstance(value, dict) else copy.deepcopy(value)
    return merged


def is_tool_part(part: Any) -> bool:
    """A tool invocation part: ``tool-<name>`` or ``dynamic-tool``."""
    kind = part.get("type", "") if isinstance(part, dict) else ""
    return isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")


def _set(target: dict, key: str, value: Any) -> None:
    """JSON drops undefined: a None value removes the key instead of storing null."""
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


class ReplyBuilder:
    """Applies chunks to one assistant message; ``base`` continues a stored one (client-side tool follow-up)."""

    def __init__(self, message_id: str, base: dict | None = None) -> None:
        self._message: dict = copy.deepcopy(base) if base else {"id": message_id, "role": "assistant", "parts": []}
        self._message["id"] = message_id
        self._message.setdefault("parts", [])
        self._text: dict[str, dict] = {}
        self._reasoning: dict[str, dict] = {}
        # Deltas of the open text / reasoning parts, joined when the message is read (no quadratic +=).
        self._pieces: dict[int, tuple[dict, list[str]]] = {}
        self._partial_inputs: dict[str, str] = {}
        self.finish_reason: str | None = None

    @property
    def message(self) -> dict:
        """The message so far (open text parts hold every delta received)."""
        for part, pieces in self._pieces.values():
            if len(pieces) > 1:
                pieces[:] = ["".join(pieces)]
            part["text"] = pieces[0] if pieces else part["text"]
        return self._message

    @property
    def parts(self) -> list[dict]:
        return self._message["parts"]

    def _close_part(self, part: dict) -> None:
        entry = self._pieces.pop(id(part), None)
        if entry is not None:
            part["text"] = "".join(entry[1])

    def _step_parts(self) -> list[dict]:
        """Parts after the last ``step-start`` (the current step)."""
        for index in range(len(self.parts) - 1, -1, -1):
            if self.parts[index].get("type") == "step-start":
                return self.parts[index + 1 :]
        return list(self.parts)

    def _tool(self, call_id: str) -> dict | None:
        for part in reversed(self.parts):
            if is_tool_part(part) and part.get("toolCallId") == call_id:
                return part
        return None

    def _tool_update(self, chunk: dict, state: str, **fields: Any) -> None:
        """Create or update the tool part of ``chunk['toolCallId']`` (in the current step, like the client)."""
        call_id = chunk["toolCallId"]
        part = next((p for p in self._step_parts() if is_tool_part(p) and p.get("toolCallId") == call_id), None)
        if part is None:
            part = self._tool(call_id) if state.startswith("output") else None
        if part is None:
            dynamic = bool(chunk.get("dynamic"))
            part = (
                {"type": "dynamic-tool", "toolName": chunk["toolName"]}
                if dynamic
                else {"type": f"tool-{chunk['toolName']}"}
            )
            part["toolCallId"] = call_id
            self.parts.append(part)
        part["state"] = state
        for key in ("input", "output", "errorText", "rawInput", "preliminary"):
            _set(part, key, fields.get(key))
        for key in _TOOL_PART_KEYS:
            if chunk.get(key) is not None:
                part[key] = chunk[key]
        metadata = chunk.get("providerMetadata")
        if metadata is not None:
            part["resultProviderMetadata" if state.startswith("output") else "callProviderMetadata"] = metadata

    def apply(self, chunk: dict) -> None:  # noqa: C901, PLR0912 - one branch per chunk type, as in the client
        """Apply one chunk; chunks that describe no content (``error``, ``abort``, transient data) change nothing."""
        kind = chunk.get("type")
        if kind == "text-start" or kind == "reasoning-start":
            part: dict = {"type": "text" if kind == "text-start" else "reasoning", "text": "", "state": "streaming"}
            _set(part, "providerMetadata", chunk.get("providerMetadata"))
            (self._text if kind == "text-start" else self._reasoning)[chunk["id"]] = part
            self._pieces[id(part)] = (part, [])
            self.parts.append(part)
        elif kind in ("text-delta", "reasoning-delta"):
            active = (self._text if kind == "text-delta" else self._reasoning).get(chunk["id"])
            if active is not None:
                self._pieces[id(active)][1].append(chunk.get("delta", ""))
                if chunk.get("providerMetadata") is not None:
                    active["providerMetadata"] = chunk["providerMetadata"]
        elif kind in ("text-end", "reasoning-end"):
            active = (self._text if kind == "text-end" else self._reasoning).pop(chunk["id"], None)
            if active is not None:
                self._close_part(active)
                active["state"] = "done"
                if chunk.get("providerMetadata") is not None:
                    active["providerMetadata"] = chunk["providerMetadata"]
        elif kind in ("file", "reasoning-file"):
            part = {"type": kind, "mediaType": chunk["mediaType"], "url": chunk["url"]}
            _set(part, "providerMetadata", chunk.get("providerMetadata"))
            self.parts.append(part)
        elif kind in ("source-url", "source-document"):
            part = {k: v for k, v in chunk.items() if v is not None}
            self.parts.append(part)
        elif kind == "tool-input-start":
            self._partial_inputs[chunk["toolCallId"]] = ""
            self._tool_update(chunk, "input-streaming")
        elif kind == "tool-input-delta":
            call_id = chunk["toolCallId"]
            text = self._partial_inputs.get(call_id, "") + chunk.get("inputTextDelta", "")
            self._partial_inputs[call_id] = text
            streaming = self._tool(call_id)
            if streaming is not None:
                with contextlib.suppress(ValueError):  # incomplete JSON: keep the last input that parsed
                    streaming["input"] = json.loads(text)
        elif kind == "tool-input-available":
            self._partial_inputs.pop(chunk["toolCallId"], None)
            self._tool_update(chunk, "input-available", input=chunk.get("input"))
        elif kind == "tool-input-error":
            self._tool_update(chunk, "output-error", rawInput=chunk.get("input"), errorText=chunk.get("errorText"))
        elif kind in ("tool-output-available", "tool-output-error"):
            existing = self._tool(chunk["toolCallId"])
            if existing is None:
                return
            name = existing.get("toolName") or existing["type"].removeprefix("tool-")
            fields: dict[str, Any] = {"input": existing.get("input"), "rawInput": existing.get("rawInput")}
            if kind == "tool-output-available":
                self._tool_update(
                    {**chunk, "toolName": name},
                    "output-available",
                    output=chunk.get("output"),
                    preliminary=chunk.get("preliminary"),
                    **fields,
                )
            else:
                self._tool_update(
                    {**chunk, "toolName": name}, "output-error", errorText=chunk.get("errorText"), **fields
                )
        elif kind == "tool-output-denied":
            existing = self._tool(chunk["toolCallId"])
            if existing is not None:
                existing["state"] = "output-denied"
        elif kind == "tool-approval-request":
            existing = self._tool(chunk["toolCallId"])
            if existing is not None:
                existing["state"] = "approval-requested"
                existing["approval"] = {"id": chunk["approvalId"]}
        elif kind == "start-step":
            self.parts.append({"type": "step-start"})
        elif kind == "finish-step":
            for part in [*self._text.values(), *self._reasoning.values()]:
                self._close_part(part)
            self._text.clear()
            self._reasoning.clear()
        elif kind in ("start", "finish", "message-metadata"):
            if kind == "finish" and chunk.get("finishReason") is not None:
                self.finish_reason = chunk["finishReason"]
            if chunk.get("messageMetadata") is not None:
                self._message["metadata"] = merge_metadata(self._message.get("metadata"), chunk["messageMetadata"])
        elif isinstance(kind, str) and kind.startswith("data-") and not chunk.get("transient"):
            data_part = {k: v for k, v in chunk.items() if k != "transient"}
            same = next(
                (
                    p
                    for p in self.parts
                    if chunk.get("id") is not None and p.get("type") == kind and p.get("id") == chunk["id"]
                ),
                None,
            )
            if same is not None:
                same["data"] = chunk.get("data")
            else:
                self.parts.append(data_part)

    def add_delta(self, text_id: str, delta: str) -> None:
        """``apply({"type": "text-delta", "id": text_id, "delta": delta})``, the short way."""
        part = self._text.get(text_id)
        if part is not None:
            self._pieces[id(part)][1].append(delta)

    def mark_partial(self, reason: str, error: str | None = None) -> None:
        """Record in ``metadata.partial`` that the reply stopped early (``reason``: error, disconnect)."""
        marker: dict[str, Any] = {"reason": reason}
        if error is not None:
            marker["error"] = error
        self._message["metadata"] = merge_metadata(self._message.get("metadata"), {"partial": marker})
