"""Message and knowledge-entry search: one web-style query language, compiled per database.

``query`` parses user text into an AST; ``fts5`` and ``tsquery`` compile it
into SQLite FTS5 / Postgres SQL; ``run`` executes it; ``snippet`` marks hits.
"""

from ..exceptions import SearchQueryError
from .query import MAX_TERMS, AnyOf, Query, Term, parse
from .snippet import START as SNIPPET_START
from .snippet import STOP as SNIPPET_STOP

__all__ = ["MAX_TERMS", "AnyOf", "Query", "SNIPPET_START", "SNIPPET_STOP", "SearchQueryError", "Term", "parse"]
