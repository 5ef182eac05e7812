"""UIMessages ⇄ OpenAI Chat Completions messages.

``to_openai_chat(history, system=...)`` builds the ``messages`` of a request;
``from_openai_chat(response.choices[0].message)`` turns the model's answer into a
UIMessage to store; ``from_openai_chat_messages(messages)`` reads a whole Chat
transcript back (the inverse of ``to_openai_chat``).

Mapping: a ``system`` UIMessage → a system message; user text and files → content parts
(images as ``image_url``, WAV/MP3 data as ``input_audio``, other data-URL files as
``file`` with ``file_data``); each step of an assistant message (split at
``step-start``) → one assistant message (its text as ``content``, its tool parts as
``tool_calls``) followed by one ``tool`` message per tool result, errors included
(the ``errorText`` is the content). Non-string outputs are sent as JSON text.

Chat Completions cannot express these, so they are dropped, always the same way:

* reasoning parts (the request format has no field for them);
* files in assistant messages, and hosted-URL files that are not images (Chat takes
  non-image files only inline);
* the order of text and tool calls inside one step (text comes first);
* tool parts still streaming their input, awaiting approval or denied, and tools the
  provider executed; ``dynamic-tool`` vs ``tool-<name>`` (read back as ``tool-<name>``);
* whether a result was an error: it comes back as ``output-available`` with the text;
  non-string outputs come back as their JSON text;
* ``source-*`` and ``data-*`` parts, part ``state`` / ``providerMetadata``, message
  ``metadata`` / ``createdAt`` and ids; filenames of images; roles other than
  system/user/assistant; messages left without content.

On the way back, a run of assistant and tool messages becomes one assistant UIMessage
(one step per assistant message), so two adjacent assistant UIMessages come back as one.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import InvalidMessage
from . import _parts as P
from . import _walk as W

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def to_openai_chat(messages: Any, *, system: str | None = None, incomplete_tool_calls: str = "drop") -> list[dict]:
    """Chat Completions ``messages`` for UIMessages (``system`` first when given).

    Tool calls without a result are left out (``incomplete_tool_calls="drop"``) or raise
    :class:`~agent_sessions.MissingToolResults` (``"raise"``). Well-formed messages take the fast
    handlers; any other goes through the checked ones, which define the output (:func:`_walk.each_role_fast`).
    """
    messages = P.check_incomplete(messages, incomplete_tool_calls)
    out = [{"role": "system", "content": system}] if system else []
    return W.each_role_fast(messages, _FAST, _HANDLERS, out, len, W.list_undo)


def _checked(messages: Any, *, system: str | None = None) -> list[dict]:
    """:func:`to_openai_chat` through the checked handlers only: the reference the fast path is tested against."""
    return W.each_role(messages, _HANDLERS, [{"role": "system", "content": system}] if system else [])


def _assistant(parts: list, out: list[dict]) -> None:
    """Append one assistant message (plus its tool results) per step; one pass over the parts."""
    texts: list[str] = []
    calls: list[dict] = []
    results: list[dict] = []
    for kind, part in P.typed_parts(parts):
        if kind == "text":
            text = part.get("text")
            if type(text) is str:
                texts.append(text)
        elif kind == "step-start":
            if texts or calls:
                _flush_step(out, texts, calls, results)
                texts, calls, results = [], [], []
        elif kind != "reasoning":
            found = P.sent_call(part)
            if found is None:
                continue
            call_id, name, state = found
            calls.append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": P.input_json(part)}}
            )
            results.append({"role": "tool", "tool_call_id": call_id, "content": P.output_text(part, state)})
    if texts or calls:
        _flush_step(out, texts, calls, results)


def _flush_step(out: list[dict], texts: list[str], calls: list[dict], results: list[dict]) -> None:
    if texts:
        content = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
        out.append(
            {"role": "assistant", "content": content, "tool_calls": calls}
            if calls
            else {"role": "assistant", "content": content}
        )
    else:
        out.append({"role": "assistant", "tool_calls": calls})
    if results:
        out.extend(results)


def _file_block(part: dict, url: str) -> dict | None:
    media_type = P.file_media_type(part)
    if media_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    inline = P.split_data_url(url)
    if inline is None:
        return None  # Chat takes non-image files inline only
    if media_type in _AUDIO_FORMATS:
        return {"type": "input_audio", "input_audio": {"data": inline[1], "format": _AUDIO_FORMATS[media_type]}}
    file: dict = {"file_data": P.data_url(media_type or inline[0], inline[1])}
    if isinstance(part.get("filename"), str) and part["filename"]:
        file["filename"] = part["filename"]
    return {"type": "file", "file": file}


#: Role → the function appending that role's messages.
_HANDLERS = W.openai_roles(_assistant, "text", _file_block)


def _fast_user(parts: list, out: list[dict]) -> None:
    """A user message of one text part as ``{"role", "content": text}``; any other through the checked handler."""
    text = P.only_text(parts)
    if text is not None:
        out.append({"role": "user", "content": text})
        return
    _HANDLERS["user"](parts, out)


def _fast_assistant(parts: list, out: list[dict]) -> None:
    """:func:`_assistant` in straight-line code: the same choices (:func:`_parts.sent_call`), JSON
    through :func:`_parts.fast_input_json`; if anything raises, the checked handler converts the message."""
    text: Any = None  # the step's text: None, one string, or a list of strings
    calls: list[dict] | None = None
    results: list[dict] | None = None
    for part in parts:
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind == "text":
            value = part.get("text")
            if type(value) is not str:
                continue
            if text is None:
                text = value
            elif type(text) is str:
                text = [text, value]
            else:
                text.append(value)
        elif kind == "step-start":
            if text is not None or calls is not None:
                _fast_flush(out, text, calls, results)
                text = calls = results = None
        elif kind != "reasoning":
            found = P.sent_call(part)
            if found is None:
                continue
            call_id, name, state = found
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": P.fast_input_json(part)}}
            if calls is None:
                calls = [call]
            else:
                calls.append(call)
            message = {"role": "tool", "tool_call_id": call_id, "content": P.fast_output_text(part, state)}
            if results is None:
                results = [message]
            else:
                results.append(message)
    if text is not None or calls is not None:
        _fast_flush(out, text, calls, results)


def _fast_flush(out: list[dict], text: Any, calls: list[dict] | None, results: list[dict] | None) -> None:
    """:func:`_flush_step` for the fast path's step (``text`` None, a string or a list of strings)."""
    if text is None:
        out.append({"role": "assistant", "tool_calls": calls})
    else:
        content = text if type(text) is str else [{"type": "text", "text": t} for t in text]
        out.append(
            {"role": "assistant", "content": content}
            if calls is None
            else {"role": "assistant", "content": content, "tool_calls": calls}
        )
    if results is not None:
        out.extend(results)


#: Role → the fast handler, falling back to :data:`_HANDLERS` per message (all checked without orjson).
_FAST = {"assistant": _fast_assistant, "user": _fast_user, "system": _HANDLERS["system"]} if P.HAS_ORJSON else _HANDLERS


def from_openai_chat(message: Any, *, id: str | None = None) -> dict:
    """A Chat Completions message (dict, SDK object or a whole ``ChatCompletion``) as a UIMessage.

    ``tool_calls`` become tool parts in state ``input-available``; a ``refusal`` becomes text.
    """
    data = P.require_dict(message, "a Chat Completions message")
    if "choices" in data:  # a whole ChatCompletion: its first choice
        choices = data.get("choices") or []
        if not choices:
            raise InvalidMessage("the ChatCompletion has no choices")
        data = P.require_dict(P.as_dict(choices[0]).get("message"), "choices[0].message")
    role = data.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant"):
        raise InvalidMessage(f"cannot convert a Chat Completions message with role {role!r} on its own")
    content = data.get("content")
    parts = [] if content is None else W.read_blocks(content, _READERS)
    if isinstance(data.get("refusal"), str) and data["refusal"]:
        parts.append({"type": "text", "text": data["refusal"]})
    for call in P.as_list(data.get("tool_calls")):
        if isinstance(call, dict) and isinstance(call.get("function"), dict) and isinstance(call.get("id"), str):
            function = call["function"]
            parts.append(
                P.tool_part(str(function.get("name") or ""), call["id"], P.parse_arguments(function.get("arguments")))
            )
    return P.ui_message(id or P.new_message_id(), role, parts)


def _image(block: dict) -> dict | None:
    image = block.get("image_url")
    url = image.get("url") if isinstance(image, dict) else None
    return P.file_part(P.guess_media_type(url, "image/*"), url) if isinstance(url, str) else None


def _audio(block: dict) -> dict | None:
    audio = block.get("input_audio")
    if not isinstance(audio, dict):
        return None
    media_type = _AUDIO_TYPES.get(str(audio.get("format")), "audio/*")
    return P.file_part(media_type, P.data_url(media_type, str(audio.get("data", ""))))


def _file(block: dict) -> dict | None:
    file = block.get("file")
    if not isinstance(file, dict):
        return None
    inline = P.split_data_url(file.get("file_data", ""))
    return None if inline is None else P.file_part(inline[0], P.data_url(*inline), file.get("filename"))


#: Content block type → its UIMessage part (None drops the block).
_READERS = {"text": W.text_block, "refusal": W.refusal_block, "image_url": _image, "input_audio": _audio, "file": _file}


def from_openai_chat_messages(messages: Any, *, id: str | None = None) -> list[dict]:
    """A Chat Completions transcript as UIMessages: the inverse of :func:`to_openai_chat`.

    Each run of assistant and ``tool`` messages becomes one assistant UIMessage with a
    step per assistant message; ``tool`` results land in their call's part. Ids are
    ``id``, ``id-1``, ... (fresh ones when ``id`` is None).
    """
    transcript = W.Transcript(id)
    for item in P.as_list(messages):
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        if role == "assistant":
            transcript.new_step().extend(from_openai_chat(item, id="_")["parts"])
        elif role == "tool":
            if transcript.run is not None:
                transcript.attach(item.get("tool_call_id"), W.text_of(item.get("content"), _READERS))
        elif role in ("system", "developer", "user"):
            transcript.messages.append(from_openai_chat(item, id=transcript.next_id()))
    return transcript.done()
