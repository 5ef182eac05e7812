"""Turn a user's search text into a parsed query: no user input ever reaches an engine as syntax.

The language and its parser live in :mod:`agent_sessions.search`; this module
keeps the seed's entry point, ``query_terms``, for the storage callers.
"""

from __future__ import annotations

from ..search.args import QueryTerms, as_query, query_terms

__all__ = ["QueryTerms", "as_query", "query_terms"]
