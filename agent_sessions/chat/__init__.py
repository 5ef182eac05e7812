"""The AI SDK chat endpoint (SPEC §9): ``ChatView`` and ``chat_urls``, and model-stream helpers.

Modules: ``request`` (the transport's POST), ``placement`` (where a turn goes in the tree),
``stream`` (the envelope and SSE), ``assemble`` (the reply rebuilt from chunks), ``store`` (the
one write of a reply), ``reply`` (running ``respond``), ``providers`` (OpenAI / Anthropic streams
to UI chunks), ``view``.
"""

from __future__ import annotations

from .providers import anthropic_chunks, openai_chunks
from .view import ChatView, chat_urls

__all__ = ["ChatView", "anthropic_chunks", "chat_urls", "openai_chunks"]
