"""App settings, read in one place.

Every setting is ``AGENT_SESSIONS_<NAME>`` in Django settings; the functions
below read them lazily (so ``override_settings`` works in tests).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # Hard limits on input, enforced before anything is written.
    "MAX_MESSAGE_BYTES": 4 * 1024 * 1024,
    "MAX_PARTS": 10_000,
    "MAX_QUERY_LENGTH": 1_000,
    # Rows fetched per query when loading long histories.
    "HISTORY_CHUNK_SIZE": 2_000,
    # Guard against parent cycles written by foreign writers (not a depth cap
    # for real data: a path is never this long).
    "MAX_PATH_DEPTH": 50_000_000,
    # Text search configuration on Postgres (the seed uses 'english').
    "PG_TEXT_SEARCH_CONFIG": "english",
    # Defaults of OpenAICompatibleSummarizer (any Chat Completions endpoint).
    "SUMMARIZER_BASE_URL": "https://api.openai.com/v1",
    "SUMMARIZER_MODEL": "gpt-4o-mini",
    "SUMMARIZER_API_KEY": None,
}


def get(name: str) -> Any:
    """Return ``settings.AGENT_SESSIONS_<name>`` or its default."""
    return getattr(settings, f"AGENT_SESSIONS_{name}", DEFAULTS[name])


def max_message_bytes() -> int:
    return int(get("MAX_MESSAGE_BYTES"))


def max_parts() -> int:
    return int(get("MAX_PARTS"))


def max_query_length() -> int:
    return int(get("MAX_QUERY_LENGTH"))


def history_chunk_size() -> int:
    return int(get("HISTORY_CHUNK_SIZE"))


def max_path_depth() -> int:
    return int(get("MAX_PATH_DEPTH"))


def pg_text_search_config() -> str:
    return str(get("PG_TEXT_SEARCH_CONFIG"))


def summarizer_base_url() -> str:
    return str(get("SUMMARIZER_BASE_URL"))


def summarizer_model() -> str:
    return str(get("SUMMARIZER_MODEL"))


def summarizer_api_key() -> str | None:
    value = get("SUMMARIZER_API_KEY")
    return None if value is None else str(value)
