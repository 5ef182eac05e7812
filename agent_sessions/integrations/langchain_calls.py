"""Model-call records (SPEC §8) for LangChain: a callback handler, no other code in the chain.

    history = DjangoChatMessageHistory("chat-1")
    chain = RunnableWithMessageHistory(model, lambda _: history)
    chain.invoke(HumanMessage("hi"), config={"callbacks": [ModelCallRecorder(history)], ...})

Each chat-model call is recorded with the messages the model got (the stored history by reference,
the rest by value), the invocation parameters and tools LangChain passed, usage and latency. The
reply's record is linked to the stored message once the history stores it.
"""

from __future__ import annotations

from threading import Lock
from typing import Any
from uuid import UUID

from ._extras import require

require("langchain_core", "langchain")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.messages import BaseMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, LLMResult  # noqa: E402

from ..session.model_calls import ModelCall  # noqa: E402
from ._calls import ReplyLinks  # noqa: E402
from ._parts import find_data  # noqa: E402
from .langchain import MESSAGE_KIND, DjangoChatMessageHistory, from_langchain, to_langchain  # noqa: E402

__all__ = ["ModelCallRecorder"]


def _to_messages(messages: list[BaseMessage]) -> list[dict]:
    names: dict[str, str] = {}
    return [from_langchain(m, names) for m in messages]


class ModelCallRecorder(BaseCallbackHandler):
    """Record every chat-model call of a run against ``history``'s session (pass it in ``callbacks``)."""

    raise_error = False  # a recording problem never breaks the chain

    def __init__(self, history: DjangoChatMessageHistory, *, model: str | None = None) -> None:
        self.history = history
        self.model = model
        self._calls: dict[UUID, ModelCall] = {}
        self._lock = Lock()
        self._links = ReplyLinks(history.store, _langchain_id)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Snapshot what the model is about to get: messages, invocation parameters, tools."""
        params = {k: v for k, v in (kwargs.get("invocation_params") or {}).items() if k != "tools"}
        tools = list((kwargs.get("invocation_params") or {}).get("tools") or [])
        model = self.model or _model_name(params, metadata, serialized)
        call = self.history.store.session.observe_model_call(
            messages[0] if messages else [],
            model=model,
            render=to_langchain,
            to_messages=_to_messages,
            params=params,
            tools=tools,
        )
        with self._lock:
            self._calls[run_id] = call

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Record the call; its reply is linked when the history stores it."""
        call = self._take(run_id)
        if call is None:
            return
        reply = _reply(response)
        usage = getattr(reply, "usage_metadata", None) if reply is not None else None
        call.observed(usage=dict(usage) if usage else None)
        if reply is not None and isinstance(reply.id, str) and reply.id:
            self._links.expect([reply.id], call.id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Record the call as failed (``status="error"``)."""
        call = self._take(run_id)
        if call is not None:
            call.close(error)

    def _take(self, run_id: UUID) -> ModelCall | None:
        with self._lock:
            return self._calls.pop(run_id, None)


def _langchain_id(message: dict) -> str | None:
    """The LangChain id of the message a stored row holds (what a reply is linked by)."""
    found, data = find_data(message, MESSAGE_KIND)
    key = (data.get("data") or {}).get("id") if found and isinstance(data, dict) else None
    return key if isinstance(key, str) and key else None


def _reply(response: LLMResult) -> BaseMessage | None:
    for generations in response.generations:
        for generation in generations:
            if isinstance(generation, ChatGeneration):
                return generation.message
    return None


def _model_name(params: dict[str, Any], metadata: dict[str, Any] | None, serialized: dict[str, Any]) -> str:
    for key in ("model", "model_name", "model_id"):
        if isinstance(params.get(key), str) and params[key]:
            return params[key]
    named = (metadata or {}).get("ls_model_name")
    if isinstance(named, str) and named:
        return named
    ident = serialized.get("id") if isinstance(serialized, dict) else None
    return str(ident[-1]) if isinstance(ident, list) and ident else str(params.get("_type") or "chat-model")
