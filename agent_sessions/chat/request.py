"""The POST of the AI SDK's ``DefaultChatTransport``, parsed and checked before anything is written.

``{"id": <chat id>, "messages": [UIMessage, ...], "trigger": "submit-message" | "regenerate-message",
"messageId"?: str}``; other keys (the transport's ``body`` option) are kept in ``extra``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from .. import conf, text
from ..api.errors import ApiError
from ..exceptions import InvalidMessage
from ..types import validate_message

SUBMIT = "submit-message"
REGENERATE = "regenerate-message"
TRIGGERS = (SUBMIT, REGENERATE)


@dataclass(frozen=True)
class ChatRequest:
    """One chat POST: the session id, the posted messages (oldest first), the trigger and its ``messageId``."""

    chat_id: str
    messages: list[dict]
    trigger: str
    message_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def last(self) -> dict:
        return self.messages[-1]


def _bad(detail: str, code: str = "invalid_chat_request") -> ApiError:
    return ApiError(400, code, detail)


def parse_body(raw: bytes) -> ChatRequest:
    """A :class:`ChatRequest` from the JSON body; a 400 ``ApiError`` that says what is wrong otherwise."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _bad("The body is not JSON.", "invalid_json") from None
    if not isinstance(body, dict):
        raise _bad("The body must be a JSON object.")
    chat_id = body.get("id")
    if not isinstance(chat_id, str) or not chat_id.strip() or not text.storable(chat_id) or len(chat_id) > 255:
        raise _bad("'id' (the chat id) must be a non-empty string of at most 255 characters.")
    trigger = body.get("trigger", SUBMIT)
    if trigger not in TRIGGERS:
        raise _bad(f"'trigger' must be one of {', '.join(TRIGGERS)}.")
    message_id = body.get("messageId")
    if message_id is not None and not isinstance(message_id, str):
        raise _bad("'messageId' must be a string.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty list of UIMessages.")
    limits = conf.message_limits()
    for index, message in enumerate(messages):
        try:
            validate_message(message, limits)
        except InvalidMessage as exc:
            raise _bad(f"messages[{index}]: {exc}", "invalid_message") from None
    ids = [m["id"] for m in messages]
    if len(set(ids)) != len(ids):
        raise _bad("'messages' repeats a message id.", "invalid_message")
    extra = {k: v for k, v in body.items() if k not in ("id", "messages", "trigger", "messageId")}
    return ChatRequest(chat_id, messages, trigger, message_id or None, extra)


def parse(request: HttpRequest) -> ChatRequest:
    """Read and parse the request body (a 413 past ``AGENT_SESSIONS_API_MAX_BODY_BYTES``)."""
    limit = conf.api_max_body_bytes()
    length = request.META.get("CONTENT_LENGTH") or "0"
    if limit is not None and length.isdigit() and int(length) > limit:
        raise ApiError(413, "body_too_large", f"The body is over {limit} bytes.")
    try:
        raw = request.body
    except RequestDataTooBig:
        raise ApiError(413, "body_too_large", "The body is too large.") from None
    return parse_body(raw)
