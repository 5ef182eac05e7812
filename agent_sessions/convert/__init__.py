"""Converters between the stored AI SDK ``UIMessage`` format and the Python LLM SDKs' formats.

* OpenAI Chat Completions: :func:`to_openai_chat`, :func:`from_openai_chat`,
  :func:`from_openai_chat_messages`;
* OpenAI Responses: :func:`to_openai_responses`, :func:`from_openai_responses`;
* Anthropic Messages: :func:`to_anthropic`, :func:`from_anthropic`, :func:`from_anthropic_messages`;
* the tool loop: :func:`run_tool_calls` / :func:`arun_tool_calls`, :func:`pending_tool_calls`.

Each target module's docstring lists what that format cannot express and is dropped.
Conversion never raises on stored messages; ``from_*`` raise ``InvalidMessage`` for input
that is not a message at all.
"""

from .anthropic import from_anthropic, from_anthropic_messages, to_anthropic
from .openai_chat import from_openai_chat, from_openai_chat_messages, to_openai_chat
from .openai_responses import from_openai_responses, to_openai_responses
from .tool_loop import arun_tool_calls, pending_tool_calls, run_tool_calls

__all__ = [
    "arun_tool_calls",
    "from_anthropic",
    "from_anthropic_messages",
    "from_openai_chat",
    "from_openai_chat_messages",
    "from_openai_responses",
    "pending_tool_calls",
    "run_tool_calls",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
]
