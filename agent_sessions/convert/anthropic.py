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
from . import _walk as W

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


#: The beta that lets a ``system`` message stand between turns (the AI SDK sends the same one).
MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-2026-04-07"


def to_anthropic(messages: Any, *, system: str | None = None, incomplete_tool_calls: str = "drop") -> dict:
    """``{"system"?: str, "messages": [...]}`` for UIMessages (same-role turns merged).

    ``system`` (e.g. the session's frozen prompt) comes first in ``system``, before the texts of
    the ``system`` UIMessages that open the conversation; a system message after a turn stays where
    it is, as a ``{"role": "system"}`` message (the request then carries the beta header it needs in
    ``extra_headers``). Tool calls without a result are left out (``incomplete_tool_calls="drop"``)
    or raise :class:`~agent_sessions.MissingToolResults` (``"raise"``).
    """
    messages = P.check_incomplete(messages, incomplete_tool_calls)
    request = W.each_role_fast(messages, _FAST, _HANDLERS, _Request([system] if system else []), len, W.list_undo)
    return request.result()


def _checked(messages: Any, *, system: str | None = None) -> dict:
    """:func:`to_anthropic` through the checked handlers only: the reference the fast path is tested against."""
    return W.each_role(messages, _HANDLERS, _Request([system] if system else [])).result()


class _Request(list):
    """What ``to_anthropic`` fills: the turns (the list itself) and the system texts.

    A list, so that :func:`_walk.each_role_fast` can mark and undo it by its length.
    """

    __slots__ = ("system",)

    def __init__(self, system: list[str]) -> None:
        super().__init__()
        self.system = system

    def result(self) -> dict:
        """The request: ``system`` (the texts joined by a blank line) when there is any, and the turns.

        As the AI SDK sends them: in each assistant turn ``tool_use`` blocks close their segment
        (the blocks between thinking blocks), and the last text of a final assistant turn is
        stripped (the API refuses trailing whitespace in a prefill).
        """
        turns = list(self)
        inline_system = False
        for turn in turns:
            role = turn["role"]
            if role == "assistant":
                turn["content"] = _tool_use_last(turn["content"])
            elif role == "system":
                inline_system = True
        if turns and turns[-1]["role"] == "assistant":
            last = turns[-1]["content"][-1]
            if last["type"] == "text":
                turns[-1]["content"][-1] = {**last, "text": last["text"].strip()}
        request: dict = {"system": "\n\n".join(self.system), "messages": turns} if self.system else {"messages": turns}
        if inline_system:
            request["extra_headers"] = {"anthropic-beta": MID_CONVERSATION_SYSTEM_BETA}
        return request


def _tool_use_last(blocks: list[dict]) -> list[dict]:
    """``blocks`` with the ``tool_use`` blocks of each segment between thinking blocks moved to its end."""
    if not any(block["type"] == "tool_use" for block in blocks[:-1]):
        return blocks
    out: list[dict] = []
    calls: list[dict] = []
    for block in blocks:
        kind = block["type"]
        if kind == "tool_use":
            calls.append(block)
        elif kind in ("thinking", "redacted_thinking"):
            out.extend(calls)
            calls = []
            out.append(block)
        else:
            out.append(block)
    out.extend(calls)
    return out


def _user(parts: list, request: _Request) -> None:
    text = P.only_text(parts)
    blocks = (
        [{"type": "text", "text": text}] if text else W.content_blocks(parts, "text", _file_block, empty_text=False)
    )
    if blocks:
        _push(request, "user", blocks)


def _system(parts: list, request: _Request) -> None:
    """Before any turn: into the top-level ``system``; after one: a ``system`` message in its place."""
    texts = [block["text"] for block in W.content_blocks(parts, "text", None, empty_text=False)]
    if not texts:
        return
    if not request:
        request.system.append("".join(texts))
    else:
        _push(request, "system", [{"type": "text", "text": "".join(texts)}])


def _push(turns: list[dict], role: str, blocks: list[dict]) -> None:
    """Append a turn of non-empty ``blocks``, merged into the last turn when it has the same role."""
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _file_block(part: dict, url: str) -> dict | None:
    media_type = P.file_media_type(part)
    inline = P.split_data_url(url)
    if media_type in _IMAGE_TYPES or media_type == "application/pdf":
        source = (
            {"type": "url", "url": url}
            if inline is None
            else {"type": "base64", "media_type": media_type, "data": inline[1]}
        )
        if media_type != "application/pdf":
            return {"type": "image", "source": source}
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


def _assistant(parts: list, request: _Request) -> None:
    """Push each step's blocks as an assistant turn and its tool results as a user turn."""
    turns = request
    blocks: list[dict] = []
    results: list[dict] = []
    for kind, part in P.typed_parts(parts):
        if kind == "text":
            text = part.get("text")
            if type(text) is str and text:
                blocks.append({"type": "text", "text": text})
        elif kind == "step-start":
            if blocks or results:
                _push_step(turns, blocks, results)
                blocks, results = [], []
        elif kind == "reasoning":
            thinking = _thinking_block(part)
            if thinking is not None:
                blocks.append(thinking)
        else:
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
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": P.result_text(part)}
            if state != "output-available":
                result["is_error"] = True
            results.append(result)
    if blocks or results:
        _push_step(turns, blocks, results)


def _thinking_block(part: dict) -> dict | None:
    """A reasoning part's ``thinking`` block (it needs its signature) or ``redacted_thinking`` block, else None."""
    meta = part.get("providerMetadata")
    meta = meta.get("anthropic") if type(meta) is dict else None
    if type(meta) is not dict:
        return None
    signature = meta.get("signature")
    if type(signature) is str:
        text = part.get("text")
        return {"type": "thinking", "thinking": text if type(text) is str else "", "signature": signature}
    if type(meta.get("redactedData")) is str:
        return {"type": "redacted_thinking", "data": meta["redactedData"]}
    return None


def _push_step(turns: list[dict], blocks: list[dict], results: list[dict]) -> None:
    """A step: its blocks as an assistant turn, then its tool results as a user turn (either may be empty).

    One call per step on the hot path: after the step's own assistant turn, its results always open
    a new user turn.
    """
    if blocks:
        _push(turns, "assistant", blocks)
        if results:
            turns.append({"role": "user", "content": results})
    elif results:
        _push(turns, "user", results)


#: Role → the function filling the request from that role's messages.
_HANDLERS = {"assistant": _assistant, "user": _user, "system": _system}


def _fast_user(parts: list, request: _Request) -> None:
    """A user message of one non-empty text part as a text block; any other through the checked handler.

    It may merge into the turn before (tool results), so it changes nothing until its checks have passed.
    """
    if len(parts) == 1:
        part = parts[0]
        if type(part) is dict and part.get("type") == "text":
            text = part.get("text")
            if type(text) is str and text:
                if request and request[-1]["role"] == "user":
                    request[-1]["content"].append({"type": "text", "text": text})
                else:
                    request.append({"role": "user", "content": [{"type": "text", "text": text}]})
                return
    _user(parts, request)


def _fast_assistant(parts: list, request: _Request) -> None:
    """:func:`_assistant` in straight-line code: the same choices (:func:`_parts.sent_call`), results
    through :func:`_parts.fast_result_text`; if anything raises, the checked handler converts the message.

    It only appends turns (undone by length), so a message that would merge into the assistant turn
    before it goes to the checked handler at once.
    """
    turns = request
    if turns and turns[-1]["role"] == "assistant":
        _assistant(parts, request)
        return
    blocks: list[dict] = []
    results: list[dict] | None = None
    for part in parts:
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if type(text) is str and text:
                blocks.append({"type": "text", "text": text})
        elif kind == "step-start":
            if blocks or results is not None:
                _fast_push_step(turns, blocks, results)
                blocks = []
                results = None
        elif kind == "reasoning":
            thinking = _thinking_block(part)
            if thinking is not None:
                blocks.append(thinking)
        else:
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
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": P.fast_result_text(part, state),
            }
            if state != "output-available":
                result["is_error"] = True
            if results is None:
                results = [result]
            else:
                results.append(result)
    if blocks or results is not None:
        _fast_push_step(turns, blocks, results)


def _fast_push_step(turns: list[dict], blocks: list[dict], results: list[dict] | None) -> None:
    """:func:`_push_step` with :func:`_push` inlined (``results`` None when the step has none).

    A result always comes with its ``tool_use`` block, so ``blocks`` is empty only when ``results``
    is too; the other case would merge into a turn from before the message, so it raises.
    """
    if not blocks:
        raise ValueError("a step of results without blocks")
    if turns and turns[-1]["role"] == "assistant":
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": "assistant", "content": blocks})
    if results is not None:
        turns.append({"role": "user", "content": results})


#: Role → the fast handler, falling back to :data:`_HANDLERS` per message (all checked without orjson).
_FAST = {"assistant": _fast_assistant, "user": _fast_user, "system": _system} if P.HAS_ORJSON else _HANDLERS


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
    return P.ui_message(id or P.new_message_id(), role, W.read_blocks(data.get("content"), _READERS))


def _thinking(block: dict) -> dict:
    signature = str(block.get("signature") or "")
    return {
        "type": "reasoning",
        "text": str(block.get("thinking") or ""),
        "providerMetadata": {"anthropic": {"signature": signature}},
    }


def _redacted_thinking(block: dict) -> dict:
    data = str(block.get("data") or "")
    return {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"redactedData": data}}}


def _tool_use(block: dict) -> dict | None:
    call_id = block.get("id")
    return (
        P.tool_part(str(block.get("name") or ""), call_id, block.get("input", {})) if isinstance(call_id, str) else None
    )


def _image(block: dict) -> dict | None:
    return _file_from_source(block.get("source"), image=True)


def _document(block: dict) -> dict | None:
    title = block.get("title")
    return _file_from_source(block.get("source"), filename=title if isinstance(title, str) else None)


def _file_from_source(source: Any, *, image: bool = False, filename: str | None = None) -> dict | None:
    if not isinstance(source, dict):
        return None
    source_type = source.get("type")
    if source_type == "base64":
        media_type = str(source.get("media_type") or "application/octet-stream")
        url = P.data_url(media_type, str(source.get("data") or ""))
    elif source_type == "url" and isinstance(source.get("url"), str):
        url = source["url"]
        media_type = P.guess_media_type(url, "image/*") if image else "application/pdf"
    elif source_type == "text" and isinstance(source.get("data"), str):
        media_type = "text/plain"
        url = P.data_url(media_type, _encode_text(source["data"]))
    else:
        return None
    return P.file_part(media_type, url, filename)


#: Content block type → its UIMessage part (None drops the block); ``tool_result`` is read apart.
_READERS = {
    "text": W.text_block,
    "thinking": _thinking,
    "redacted_thinking": _redacted_thinking,
    "tool_use": _tool_use,
    "image": _image,
    "document": _document,
}


def from_anthropic_messages(request: Any, *, id: str | None = None) -> list[dict]:
    """A conversation (``{"system"?, "messages"}`` or a list of messages) as UIMessages.

    The inverse of :func:`to_anthropic`: ``system`` becomes a leading system UIMessage;
    each run of assistant turns and tool results becomes one assistant UIMessage (a step per
    assistant turn), ``tool_result`` blocks landing in their call's part. Ids are ``id``,
    ``id-1``, ... (fresh ones when ``id`` is None).
    """
    data = P.as_dict(request)
    turns = data.get("messages") if isinstance(data, dict) else data
    transcript = W.Transcript(id)
    system = data.get("system") if isinstance(data, dict) else None
    if isinstance(system, list):
        system = "\n\n".join(b.get("text", "") for b in P.as_list(system) if isinstance(b, dict))
    if isinstance(system, str) and system:
        transcript.add("system", [{"type": "text", "text": system}])
    for turn in P.as_list(turns):
        if not isinstance(turn, dict):
            continue
        role, content = turn.get("role"), turn.get("content")
        if role == "assistant":
            transcript.new_step().extend(W.read_blocks(content, _READERS))
        elif role == "user":
            if not isinstance(content, str):
                content = [block for block in P.as_list(content) if not _is_result(block, transcript)]
            parts = W.read_blocks(content, _READERS)
            if parts:
                transcript.add("user", parts)
    return transcript.done()


def _is_result(block: Any, transcript: W.Transcript) -> bool:
    """Whether ``block`` is a ``tool_result``; one is put into its call's part in the open run."""
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return False
    if transcript.run is not None:
        text = W.text_of(block.get("content"), _RESULT_READERS)
        transcript.attach(block.get("tool_use_id"), text, error=bool(block.get("is_error")))
    return True


_RESULT_READERS = {"text": lambda block: {"type": "text", "text": str(block.get("text", ""))}}
