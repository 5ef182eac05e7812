"""UIMessages ⇄ Anthropic Messages API.

``to_anthropic(history)`` gives ``{"system"?: str, "messages": [...]}`` to spread into
``client.messages.create(**..., model=..., max_tokens=...)``; ``from_anthropic(response)``
turns the model's answer into a UIMessage; ``from_anthropic_messages(request)`` reads a
whole conversation back (the inverse of ``to_anthropic``).

Mapping: ``system`` UIMessages → the top-level ``system`` string (texts joined by a blank
line); text → ``text`` blocks; images (JPEG, PNG, GIF, WebP) → ``image`` blocks, PDFs and
plain text → ``document`` blocks (filename as ``title``), from a URL or data; reasoning
with ``providerMetadata.anthropic.signature`` → ``thinking`` blocks, with ``redactedData``
→ ``redacted_thinking``, stored the way the AI SDK does; tool parts → ``tool_use``, their
results → ``tool_result`` blocks (``is_error`` for errors, JSON text for non-string
outputs) in the next user turn. Consecutive same-role turns are merged, as the API
requires, so tool results and the next user message share one user turn.

The Messages API cannot express these, so they are dropped, always the same way:

* reasoning without a signature or redacted data (another provider's reasoning);
* empty text parts (the API rejects empty text blocks); files in assistant messages and
  media types other than the ones above;
* the position of system messages (all go into ``system``); the boundary between
  adjacent same-role messages, and steps not followed by a tool result (turns merge);
* tool inputs that are not JSON objects (sent as ``{}``); tool parts still streaming
  their input, awaiting approval or denied, and tools the provider executed;
  ``dynamic-tool`` vs ``tool-<name>`` (read back as ``tool-<name>``); non-string
  outputs come back as their JSON text;
* ``source-*`` and ``data-*`` parts, text ``state`` / ``providerMetadata``, message
  ``metadata`` / ``createdAt`` and ids; roles other than system/user/assistant; block
  types other than the ones above (server tools, citations, search results...).
"""

from __future__ import annotations

import base64
from typing import Any

from ..exceptions import InvalidMessage
from . import _parts as P

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def to_anthropic(messages: Any, *, system: str | None = None) -> dict:
    """``{"system"?: str, "messages": [...]}`` for UIMessages (same-role turns merged).

    ``system`` (e.g. the session's frozen prompt) comes first in ``system``, before the
    texts of ``system`` UIMessages.
    """
    system_texts: list[str] = [system] if system else []
    turns: list[dict] = []

    def push(role: str, blocks: list[dict]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in P.iter_messages(messages):
        role = message.get("role")
        parts = message.get("parts")
        if type(parts) is not list:
            continue
        if role == "assistant":
            _assistant(parts, push)
        elif role == "user":
            text = P.only_text(parts)
            if text:
                push("user", [{"type": "text", "text": text}])
            else:
                push("user", [b for b in (_user_block(p) for p in parts if type(p) is dict) if b is not None])
        elif role == "system":
            system_texts.extend(t for t in P.texts(p for p in parts if type(p) is dict) if t)
    request: dict = {"messages": turns}
    if system_texts:
        request = {"system": "\n\n".join(system_texts), **request}
    return request


def _user_block(part: dict) -> dict | None:
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        return {"type": "text", "text": text} if isinstance(text, str) and text else None
    if kind != "file" or not isinstance(part.get("url"), str) or not part["url"]:
        return None
    url, media_type = part["url"], P.file_media_type(part)
    inline = P.split_data_url(url)
    if media_type in _IMAGE_TYPES:
        source = (
            {"type": "url", "url": url}
            if inline is None
            else {"type": "base64", "media_type": media_type, "data": inline[1]}
        )
        return {"type": "image", "source": source}
    if media_type == "application/pdf":
        source = (
            {"type": "url", "url": url}
            if inline is None
            else {"type": "base64", "media_type": media_type, "data": inline[1]}
        )
    elif media_type == "text/plain" and inline is not None:
        source = {"type": "text", "media_type": "text/plain", "data": _decode_text(inline[1])}
    else:
        return None
    block: dict = {"type": "document", "source": source}
    if isinstance(part.get("filename"), str) and part["filename"]:
        block["title"] = part["filename"]
    return block


def _decode_text(payload: str) -> str:
    return base64.b64decode(payload).decode("utf-8", errors="replace")


def _encode_text(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _assistant(parts: list, push: Any) -> None:
    """Push each step's blocks as an assistant turn and its tool results as a user turn."""
    blocks: list[dict] = []
    results: list[dict] = []
    for part in parts:
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if type(text) is str and text:
                blocks.append({"type": "text", "text": text})
        elif kind == "step-start":
            push("assistant", blocks)
            push("user", results)
            blocks, results = [], []
        elif kind == "reasoning":
            meta = P.reasoning_meta(part, "anthropic")
            if type(meta.get("signature")) is str:
                text = part.get("text")
                blocks.append(
                    {"type": "thinking", "thinking": text if type(text) is str else "", "signature": meta["signature"]}
                )
            elif type(meta.get("redactedData")) is str:
                blocks.append({"type": "redacted_thinking", "data": meta["redactedData"]})
        elif kind not in _NOT_TOOLS:
            found = P.sent_call(part)
            if found is None:
                continue
            call_id, name, state = found
            tool_input = part.get("input")
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": name,
                    "input": tool_input if type(tool_input) is dict else {},
                }
            )
            if state != "input-available":
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": P.result_text(part)}
                if state == "output-error":
                    result["is_error"] = True
                results.append(result)
    push("assistant", blocks)
    push("user", results)


_NOT_TOOLS = frozenset({"file", "source-url", "source-document"})


def from_anthropic(message: Any, *, id: str | None = None) -> dict:
    """An Anthropic message (a response ``Message`` or a ``MessageParam``; dict or SDK object) as a UIMessage.

    ``tool_use`` blocks become tool parts in state ``input-available``; ``thinking`` keeps its
    signature in ``providerMetadata.anthropic``. ``tool_result`` blocks need the call they answer:
    read a whole conversation with :func:`from_anthropic_messages` instead.
    """
    data = P.require_dict(message, "an Anthropic message")
    role = data.get("role")
    if role not in ("user", "assistant"):
        raise InvalidMessage(f"cannot convert an Anthropic message with role {role!r}")
    parts = [p for p in (_part(b) for b in _blocks(data.get("content"))) if p is not None]
    return P.ui_message(id or P.new_message_id(), role, parts)


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in P.as_list(content) if isinstance(b, dict)]


def _part(block: dict) -> dict | None:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "thinking":
        return {
            "type": "reasoning",
            "text": str(block.get("thinking") or ""),
            "providerMetadata": {"anthropic": {"signature": str(block.get("signature") or "")}},
        }
    if kind == "redacted_thinking":
        return {
            "type": "reasoning",
            "text": "",
            "providerMetadata": {"anthropic": {"redactedData": str(block.get("data") or "")}},
        }
    if kind == "tool_use" and isinstance(block.get("id"), str):
        return P.tool_part(str(block.get("name") or ""), block["id"], block.get("input", {}))
    if kind in ("image", "document") and isinstance(block.get("source"), dict):
        return _file_from_source(kind, block["source"], block.get("title"))
    return None


def _file_from_source(kind: str, source: dict, title: Any) -> dict | None:
    filename = title if isinstance(title, str) else None
    source_type = source.get("type")
    if source_type == "base64":
        media_type = str(source.get("media_type") or "application/octet-stream")
        url = P.data_url(media_type, str(source.get("data") or ""))
    elif source_type == "url" and isinstance(source.get("url"), str):
        url = source["url"]
        media_type = P.guess_media_type(url, "image/*") if kind == "image" else "application/pdf"
    elif source_type == "text" and isinstance(source.get("data"), str):
        media_type = "text/plain"
        url = P.data_url(media_type, _encode_text(source["data"]))
    else:
        return None
    return P.file_part(media_type, url, None if kind == "image" else filename)


def from_anthropic_messages(request: Any, *, id: str | None = None) -> list[dict]:
    """A conversation (``{"system"?, "messages"}`` or a list of messages) as UIMessages.

    The inverse of :func:`to_anthropic`: ``system`` becomes a leading system UIMessage;
    each run of assistant turns and tool results becomes one assistant UIMessage (a step per
    assistant turn), ``tool_result`` blocks landing in their call's part. Ids are ``id``,
    ``id-1``, ... (fresh ones when ``id`` is None).
    """
    data = P.as_dict(request)
    turns = data.get("messages") if isinstance(data, dict) else data
    ids = P.message_ids(id)
    out: list[dict] = []
    system = data.get("system") if isinstance(data, dict) else None
    if isinstance(system, list):
        system = "\n\n".join(b.get("text", "") for b in P.as_list(system) if isinstance(b, dict))
    if isinstance(system, str) and system:
        out.append(P.ui_message(next(ids), "system", [{"type": "text", "text": system}]))
    run: list[list[dict]] | None = None

    def close_run() -> None:
        nonlocal run
        if run is not None:
            out.append(P.ui_message(next(ids), "assistant", P.join_steps(run)))
            run = None

    for turn in P.as_list(turns):
        if not isinstance(turn, dict):
            continue
        blocks = _blocks(turn.get("content"))
        if turn.get("role") == "assistant":
            run = [*(run or []), [p for p in (_part(b) for b in blocks) if p is not None]]
            continue
        if turn.get("role") != "user":
            continue
        rest = []
        for block in blocks:
            if block.get("type") == "tool_result":
                if run is not None:
                    _attach_result(run, block)
            else:
                rest.append(block)
        parts = [p for p in (_part(b) for b in rest) if p is not None]
        if parts:
            close_run()
            out.append(P.ui_message(next(ids), "user", parts))
    close_run()
    return out


def _attach_result(run: list[list[dict]], block: dict) -> None:
    content = block.get("content")
    text = (
        content
        if isinstance(content, str)
        else "".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")
    )
    for step in reversed(run):
        for index, part in enumerate(step):
            if P.is_tool_part(part) and part["toolCallId"] == block.get("tool_use_id"):
                step[index] = P.with_result(part, text, error=bool(block.get("is_error")))
                return
