"""Converters between the stored AI SDK ``UIMessage`` format and the Python LLM SDKs' formats.

* OpenAI Chat Completions: :func:`to_openai_chat`, :func:`from_openai_chat`,
  :func:`from_openai_chat_messages`;
* OpenAI Responses: :func:`to_openai_responses`, :func:`from_openai_responses`;
* Anthropic Messages: :func:`to_anthropic`, :func:`from_anthropic`, :func:`from_anthropic_messages`;
* the tool loop: :func:`run_tool_calls` / :func:`arun_tool_calls`, :func:`pending_tool_calls`.

Each target module's docstring lists what that format cannot express and is dropped.
Conversion never raises on stored messages; ``from_*`` raise ``InvalidMessage`` for input
that is not a message at all.

Each ``to_*`` has two sets of handlers: checked ones (the reference) and fast ones for the
shapes a stored message has, which give up on anything else; ``_walk.each_role_fast`` then
undoes what the fast handler added and converts that message the checked way.
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
