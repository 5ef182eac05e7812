"""Model-call records (SPEC §8) for the OpenAI Agents SDK: run hooks, no other code in the agent.

    session = AgentsSession("chat-1")
    await Runner.run(agent, "hi", session=session, hooks=ModelCallHooks(session))

Each model call of the run is recorded from the SDK's ``on_llm_start`` (the instructions and input
items the model gets; the agent's model settings and tools) and ``on_llm_end`` (usage, latency). The
input's stored part is referenced, what the session does not hold yet is kept by value. The record
is linked to the reply's first stored message once the session stores it (the Runner does, after
the turn). The SDK has no hook for a failed model call: such a call is not recorded.
"""

from __future__ import annotations

import dataclasses
from threading import Lock
from typing import Any

from asgiref.sync import sync_to_async

from ._extras import require

require("agents", "openai-agents")

from agents import Agent, RunContextWrapper, RunHooks  # noqa: E402
from agents.items import ModelResponse  # noqa: E402

from ..session.model_calls import ModelCall  # noqa: E402
from ._calls import ReplyLinks  # noqa: E402
from ._parts import find_data  # noqa: E402
from .openai_agents import ITEM_KIND, AgentsSession, _plain, item_to_message, message_to_items  # noqa: E402

__all__ = ["ModelCallHooks"]


def _to_messages(items: list[Any]) -> list[dict]:
    names: dict[str, str] = {}
    return [item_to_message(_plain(item), names) for item in items]


def _render(message: dict) -> list[dict]:
    return message_to_items(message)


class ModelCallHooks(RunHooks):
    """Run hooks that record every model call of a run against ``session`` (pass as ``hooks=``)."""

    def __init__(self, session: AgentsSession) -> None:
        self.agents_session = session
        self._calls: dict[int, ModelCall] = {}
        self._lock = Lock()
        self._links = ReplyLinks(session.store, _item_id)

    async def on_llm_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], system_prompt: str | None, input_items: list[Any]
    ) -> None:
        """Snapshot what the model is about to get."""
        sent = [_plain(item) for item in input_items]
        call = await sync_to_async(self._start, thread_sensitive=True)(agent, system_prompt, sent)
        with self._lock:
            self._calls[id(agent)] = call

    def _start(self, agent: Agent[Any], system_prompt: str | None, sent: list[dict]) -> ModelCall:
        return self.agents_session.store.session.observe_model_call(
            sent,
            model=_model_name(agent),
            render=_render,
            to_messages=_to_messages,
            system=system_prompt,
            params=_settings(agent),
            tools=[_tool(t) for t in agent.tools],
        )

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        """Record the call; its reply is linked when the session stores it."""
        with self._lock:
            call = self._calls.pop(id(agent), None)
        if call is None:
            return
        usage = dataclasses.asdict(response.usage) if dataclasses.is_dataclass(response.usage) else None
        await sync_to_async(call.observed, thread_sensitive=True)(usage=usage)
        keys = [_plain(item).get("id") for item in response.output]
        self._links.expect([k for k in keys if isinstance(k, str) and k], call.id)


def _item_id(message: dict) -> str | None:
    """The id of the SDK item a stored row holds (a reply is linked by its output items' ids)."""
    found, item = find_data(message, ITEM_KIND)
    key = item.get("id") if found and isinstance(item, dict) else None
    return key if isinstance(key, str) and key else None


def _model_name(agent: Agent[Any]) -> str:
    model = agent.model
    if isinstance(model, str) and model:
        return model
    named = getattr(model, "model", None)
    if isinstance(named, str) and named:
        return named
    return type(model).__name__ if model is not None else "default"


def _settings(agent: Agent[Any]) -> dict[str, Any]:
    settings = agent.model_settings
    to_dict = getattr(settings, "to_json_dict", None)
    data = to_dict() if callable(to_dict) else {}
    return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else {}


def _tool(tool: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": getattr(tool, "name", type(tool).__name__)}
    if getattr(tool, "description", None):
        spec["description"] = tool.description
    schema = getattr(tool, "params_json_schema", None)
    if schema is not None:
        spec["parameters"] = schema
    return spec
