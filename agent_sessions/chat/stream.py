"""The UI message stream envelope and its Server-Sent Events encoding.

The view owns the envelope: ``start`` (naming the assistant message), ``start-step`` /
``finish-step`` around each step and ``finish``; ``respond`` yields content only.  Plain strings
become the deltas of one text part.  :class:`Envelope` turns what ``respond`` yields into the
chunks sent, one call per item, so the sync and the async streaming paths share it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..exceptions import InvalidMessage

HEADERS = {
    "Cache-Control": "no-cache",
    "X-Vercel-AI-UI-Message-Stream": "v1",
    "X-Accel-Buffering": "no",
}
CONTENT_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"
_ENVELOPE = frozenset({"start", "finish", "start-step", "finish-step", "abort", "error"})


_orjson_dumps: Callable[[Any], bytes] | None
try:  # the ``fast`` extra: the same JSON text, several times faster
    from orjson import dumps as _orjson_dumps
except ImportError:  # pragma: no cover - exercised where orjson is not installed
    _orjson_dumps = None


def _json(chunk: dict) -> bytes:
    if _orjson_dumps is not None:
        try:
            return _orjson_dumps(chunk)
        except TypeError:  # orjson's JSONEncodeError: a lone surrogate, a huge int, a non-str key
            pass
    return json.dumps(chunk, separators=(",", ":")).encode()  # ASCII: a lone surrogate escaped


def sse(chunk: dict) -> bytes:
    """One chunk as an SSE event (``data: <json>`` and a blank line), as ``JsonToSseTransformStream`` writes it."""
    return b"data: " + _json(chunk) + b"\n\n"


class RespondFailed(Exception):
    """``respond`` yielded an ``error`` or ``abort`` chunk: handled like an exception it raised."""


class Envelope:
    """What the client receives for what ``respond`` yields (``feed``), and how the stream opens and closes."""

    def __init__(self, message_id: str, *, metadata: Any = None) -> None:
        self.message_id = message_id
        self.metadata = metadata
        self._in_step = False
        self._text_id: str | None = None
        self._texts = 0
        self._finish: dict = {"type": "finish"}

    def open(self) -> list[dict]:
        """``start`` (the server names the message, before any content) and the first ``start-step``."""
        start: dict = {"type": "start", "messageId": self.message_id}
        if self.metadata is not None:
            start["messageMetadata"] = self.metadata
        self._in_step = True
        return [start, {"type": "start-step"}]

    def continue_text(self, delta: str) -> dict | None:
        """The ``text-delta`` chunk of ``delta`` when a text part is open (the common case), else None."""
        if self._text_id is None:
            return None
        return {"type": "text-delta", "id": self._text_id, "delta": delta}

    def feed(self, item: Any) -> list[dict]:
        """The chunks one yielded item becomes: a string is a text delta; a dict a chunk (envelope ones folded in)."""
        if isinstance(item, str):
            if not item:
                return []
            out = self._step()
            if self._text_id is None:
                self._texts += 1
                self._text_id = f"{self.message_id}-text-{self._texts}"
                out.append({"type": "text-start", "id": self._text_id})
            out.append({"type": "text-delta", "id": self._text_id, "delta": item})
            return out
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise InvalidMessage(f"respond yielded {type(item).__name__}: expected a UI chunk dict or a string")
        out = self._close_text()
        kind = item["type"]
        if kind not in _ENVELOPE:
            return out + self._step() + [item]
        if kind == "start-step":
            return out  # the step opens with the next content
        if kind == "finish-step":
            if self._in_step:
                self._in_step = False
                out.append({"type": "finish-step"})
            return out
        if kind == "start":
            if item.get("messageMetadata") is not None:
                out.append({"type": "message-metadata", "messageMetadata": item["messageMetadata"]})
            return out
        if kind == "finish":
            self._finish = {k: v for k, v in item.items() if v is not None}
            return out
        raise RespondFailed(str(item.get("errorText") or item.get("reason") or kind))

    def close(self) -> list[dict]:
        """The open text part and step closed, then ``finish``."""
        out = self._close_text()
        if self._in_step:
            self._in_step = False
            out.append({"type": "finish-step"})
        return [*out, self._finish]

    def fail(self, error_text: str) -> list[dict]:
        """The ``error`` chunk (sent after the partial reply is stored; the client stops reading at it)."""
        return [{"type": "error", "errorText": error_text}]

    def _step(self) -> list[dict]:
        if self._in_step:
            return []
        self._in_step = True
        return [{"type": "start-step"}]

    def _close_text(self) -> list[dict]:
        if self._text_id is None:
            return []
        text_id, self._text_id = self._text_id, None
        return [{"type": "text-end", "id": text_id}]
