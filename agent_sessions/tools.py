"""AI tools a session offers the model: a JSON Schema, an ``execute`` that never raises, and SDK adapters.

A tool's result is what the model reads, so failures (a bad label, a missing
argument, a provider that broke) come back as a string starting with
``Error:`` instead of an exception escaping into the agent loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .asyncutils import acall, call
from .exceptions import ToolArgumentError

logger = logging.getLogger(__name__)

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list, tuple),
}


class Tool:
    """One AI tool: ``Tool(name, description, parameters, execute)``.

    ``parameters`` is a JSON Schema object; the ``execute`` given may be a plain
    function or a coroutine function taking the arguments as keywords.
    """

    def __init__(self, name: str, description: str, parameters: dict, execute: Callable[..., Any]) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.function = execute

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def execute(self, /, **arguments: Any) -> str:
        """Run the tool; always returns a string (``Error: ...`` on bad input or failure)."""
        try:
            kwargs = self.validate(arguments)
            return _as_text(call(self.function, **kwargs))
        except Exception as exc:  # noqa: BLE001 - a tool reports, never raises
            return self._report(exc)

    async def aexecute(self, /, **arguments: Any) -> str:
        """Async twin of :meth:`execute` (sync implementations run in Django's sync thread)."""
        try:
            kwargs = self.validate(arguments)
            return _as_text(await acall(self.function, **kwargs))
        except Exception as exc:  # noqa: BLE001 - a tool reports, never raises
            return self._report(exc)

    def validate(self, arguments: dict) -> dict:
        """The arguments, checked against the schema; ToolArgumentError (nothing runs) otherwise.

        An argument the schema does not declare is an error, not dropped: a model that
        wrote ``action="append"`` must learn the valid names before anything is written.
        ``None`` counts as absent.
        """
        properties: dict = self.parameters.get("properties") or {}
        valid = "valid: " + (", ".join(properties) or "none")
        unknown = [k for k in arguments if k not in properties]
        kwargs = {k: v for k, v in arguments.items() if k in properties and v is not None}
        missing = [n for n in self.parameters.get("required") or [] if n not in kwargs]
        problems = []
        if unknown:
            problems.append(_named("unknown", unknown))
        if missing:
            problems.append(_named("missing required", missing))
        if problems:
            raise ToolArgumentError(f"{'; '.join(problems)}; {valid}")
        for name, value in kwargs.items():
            _check_type(name, value, properties[name])
        return kwargs

    def _report(self, exc: Exception) -> str:
        if not isinstance(exc, ToolArgumentError | LookupError | ValueError):
            logger.warning("tool %s failed", self.name, exc_info=exc)
        message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        return f"Error: {message or type(exc).__name__}"

    def to_openai(self) -> dict:
        """Chat Completions tool definition: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def to_anthropic(self) -> dict:
        """Anthropic Messages tool definition: ``{"name", "description", "input_schema"}``."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}


def _named(what: str, names: list) -> str:
    """``unknown argument 'x'`` / ``unknown arguments 'x', 'y'``."""
    quoted = ", ".join(f"'{n}'" for n in names)
    return f"{what} argument{'s' if len(names) > 1 else ''} {quoted}"


def _check_type(name: str, value: Any, schema: dict) -> None:
    """Raise ToolArgumentError when ``value`` is not of the schema's JSON type (nested object properties too)."""
    kind = schema.get("type")
    expected = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
    if expected and (not isinstance(value, expected) or (bool not in expected and isinstance(value, bool))):
        raise ToolArgumentError(f"argument '{name}' must be of type {kind}, not {_json_type(value)}")
    if kind == "object" and isinstance(schema.get("properties"), dict):
        for key, item in value.items():
            inner = schema["properties"].get(key)
            if inner is not None and item is not None:
                _check_type(f"{name}.{key}", item, inner)


def _json_type(value: Any) -> str:
    """The JSON type name of a Python value, for error messages."""
    if isinstance(value, bool):
        return "boolean"
    for kind in ("integer", "number", "string", "object", "array"):
        if isinstance(value, _JSON_TYPES[kind]):
            return kind
    return type(value).__name__


def _as_text(result: Any) -> str:
    return result if isinstance(result, str) else ("" if result is None else str(result))
