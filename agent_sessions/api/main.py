"""The NinjaAPI: routers, authentication, error handlers and request guards."""

from __future__ import annotations

from typing import Any

from ninja import NinjaAPI

from .. import __version__
from . import (
    errors,
    openapi,
    routes_compaction,
    routes_context,
    routes_messages,
    routes_model_calls,
    routes_search,
    routes_sessions,
    routes_tools,
)
from .auth import ApiKeyAuth, LoginSessionAuth
from .limits import CheckedJsonParser, guard_request
from .renderer import StrictJSONRenderer
from .throttling import throttles

DESCRIPTION = """Conversation storage for LLM agents: sessions, tree-structured messages,
search, compaction, context blocks and AI tools.

Authenticate with an API key (`Authorization: Bearer ask_…`, see `manage.py create_api_key`)
or a Django login session (unsafe methods then need the `X-CSRFToken` header).
A client sees only the sessions it owns; every error, whatever its status, is
`{"detail": ..., "code": ...}` (validation errors add `errors`).  Request bodies are JSON objects
sent as `application/json`.  Operations marked deprecated are kept for one release."""


class AgentSessionsApi(NinjaAPI):
    """NinjaAPI whose OpenAPI document is refined by :mod:`.openapi` (links, exact optional bodies) and built
    once per process: ninja would rebuild it on every request (seconds on a busy machine, for a document
    that only changes with the code)."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        key = repr((args, sorted(kwargs.items())))
        cache = self.__dict__.setdefault("_openapi_cache", {})
        if key not in cache:
            cache[key] = openapi.refine(super().get_openapi_schema(*args, **kwargs))
        return cache[key]


def build_api() -> NinjaAPI:
    """A fresh NinjaAPI with every route (the module-level ``api`` is the one the urls mount)."""
    api = AgentSessionsApi(
        title="agent_sessions API",
        version=__version__,
        description=DESCRIPTION,
        urls_namespace="agent_sessions_api",
        auth=[ApiKeyAuth(), LoginSessionAuth()],
        parser=CheckedJsonParser(),
        renderer=StrictJSONRenderer(),
        throttle=throttles(),
    )
    errors.install(api)
    api.add_decorator(guard_request, mode="view")
    # routes_model_calls before routes_messages: its ``messages/{path}/model-input`` would otherwise be
    # taken for a message id by ``messages/{path}``.
    routers = (routes_sessions, routes_model_calls, routes_messages, routes_search, routes_compaction, routes_context)
    for module in (*routers, routes_tools):
        api.add_router("", module.router)
    return api


api = build_api()
