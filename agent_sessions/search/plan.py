"""What both compilers share: the searched table, the caller's filters, result finishing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import snippet as snippets
from .query import Query, Term


@dataclass(frozen=True)
class Target:
    """A searchable table: its text column, returned columns, scope column and indexes."""

    table: str
    text: str
    columns: tuple[str, ...]
    scope: str
    fts: str = ""  # SQLite: the porter FTS5 table
    trigram: str = ""  # SQLite: the trigram FTS5 table
    tsv: str = "content_tsv"  # Postgres: the generated tsvector column
    has_role: bool = False
    extra: str = ""  # a second, lower-ranked text column searched with ``text`` (messages: tool_text)
    owned_scopes: str = ""  # SQL of the scope values one owner has (one %s: the owner), for Filters.owner

    def tsv_sql(self, alias: str) -> str:
        """The row's tsvector: the ``tsv`` column, or ``tsv`` as an expression with ``{m}`` for ``alias``."""
        return self.tsv.replace("{m}", alias) if "{m}" in self.tsv else alias + self.tsv


MESSAGES = Target(
    table="assistant_messages",
    text="text_content",
    columns=("id", "role", "text_content", "created_at", "session_id"),
    scope="session_id",
    fts="assistant_fts",
    trigram="assistant_fts_trigram",
    has_role=True,
    extra="tool_text",
    owned_scopes="SELECT id FROM assistant_sessions WHERE owner_id = %s",
)
SUMMARIES = Target(
    table="assistant_compactions",
    text="summary",
    columns=("id", "summary", "created_at", "session_id"),
    scope="session_id",
    fts="assistant_compactions_fts",
    trigram="assistant_compactions_fts_trigram",
    tsv="",  # Postgres: the indexed expression, set by the backend (it holds the text search configuration)
    owned_scopes=MESSAGES.owned_scopes,
)
"""Compaction summaries (migration 0004 indexes them), found beside the messages they stand for."""
ENTRIES = Target(
    table="cf_agents_search_entries",
    text="content",
    columns=("key", "content"),
    scope="label",
    fts="cf_agents_search_fts",
    trigram="cf_agents_search_fts_trigram",
)


EXTRA_WEIGHT = 0.25
"""Rank weight of a match in a target's ``extra`` column (tool text) relative to one in ``text`` (1.0)."""


@dataclass(frozen=True)
class Filters:
    """Where and how many: scope value (None = everywhere), roles, page, snippets, scan bound."""

    scope: str | None = None
    roles: tuple[str, ...] | None = None
    limit: int = 20
    offset: int = 0
    snippets: bool = False
    scan_rows: int = 50_000
    ranked: bool = False  # also select a ``rank`` column (higher is better), after the snippet
    owner: object = None  # only scopes this owner has (target.owned_scopes), e.g. the API caller's sessions
    keys: str = ""  # only this column of every hit: no rank, order, page or snippet (a subquery's SQL)


RANK_TYPE = "DOUBLE PRECISION"
"""The type the ``rank`` column is cast to (a float on both vendors)."""


@dataclass(frozen=True)
class Split:
    """A query sorted by which index can answer each part."""

    words: tuple  # groups of only non-CJK terms (stemmed word index)
    substrings: tuple  # groups of only CJK terms of trigram length
    other: tuple  # mixed groups, or groups with a short CJK term
    excluded_words: tuple[Term, ...]
    excluded_substrings: tuple[Term, ...]

    @property
    def indexed(self) -> bool:
        """Some required group is answered by an index; otherwise the scan is bounded."""
        return bool(self.words or self.substrings or any(g.indexed for g in self.other))


def split(query: Query) -> Split:
    """Sort ``query``'s groups by index."""
    words = tuple(g for g in query.groups if not any(t.cjk for t in g.terms))
    subs = tuple(g for g in query.groups if all(t.cjk and not t.short for t in g.terms))
    other = tuple(g for g in query.groups if g not in words and g not in subs)
    return Split(
        words,
        subs,
        other,
        tuple(t for t in query.excluded if not t.cjk),
        tuple(t for t in query.excluded if t.cjk),
    )


def like_pattern(text: str) -> str:
    """``%text%`` with LIKE wildcards escaped (escape character: backslash)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def occurrences_sql(text_col: str, needles: list[Term], greatest: str) -> str:
    """SQL summing how often each needle (each bound twice) occurs; case folded only where it matters.

    ``greatest`` is the vendor's two-argument maximum (``max`` / ``greatest``).
    """
    parts = []
    for term in needles:
        col, arg = (text_col, "%s") if term.caseless else (f"lower({text_col})", "lower(%s)")
        parts.append(f"(length({col}) - length(replace({col}, {arg}, ''))) / {greatest}(length({arg}), 1)")
    return " + ".join(parts)


def snippet_columns(target: Target, filters: Filters, alias: str) -> str:
    """What a compiler selects after the snippet: the ``extra`` text, for Python-made excerpts."""
    return f", {alias}{target.extra}" if target.extra and filters.snippets else ""


def finish(rows: list[tuple], query: Query, target: Target, filters: Filters) -> list[tuple]:
    """Rows with the snippet column completed (or dropped when not asked for).

    A hit found only in the ``extra`` column (tool text) gets its excerpt from there,
    so the snippet shows why it matched; the row's text column stays as stored.
    """
    if not filters.snippets:
        return [tuple(r[: len(target.columns)]) for r in rows]
    text_at = target.columns.index(target.text)
    needles = [t.text for t in query.terms]
    cjk = [t.text for t in query.terms if t.cjk]
    out = []
    for row in rows:
        *cols, made = row[: len(target.columns) + 1]
        extra = row[len(target.columns) + 1] if target.extra else ""
        if made is None:
            text = cols[text_at] or ""
            if extra and not snippets.contains_any(text, needles) and snippets.contains_any(extra, needles):
                text = extra
            made = snippets.excerpt(text, needles)
        elif cjk:
            made = snippets.mark_outside(made, cjk)
        out.append((*cols, made))
    return out


RoleTest = Callable[[str, tuple[str, ...], list], str]
"""``(column, roles, params) -> condition``: the vendor's "role is one of these" test (binds into ``params``)."""


def in_subquery(column: str, subquery: str) -> str:
    """``column`` is one of the values ``subquery`` selects (the default owner test)."""
    return f"{column} IN ({subquery})"


def scope_source(
    target: Target,
    filters: Filters,
    role_test: RoleTest,
    *,
    indexed: bool,
    from_params: list,
    where_params: list,
    owned_test: Callable[[str, str], str] = in_subquery,
) -> tuple[str, list[str]]:
    """The FROM source (aliased ``m``) and its scope conditions.

    With an indexed term the table itself; otherwise only the newest ``scan_rows``
    rows of the scope (short CJK terms), so an unindexed search stays bounded.
    """
    if indexed:
        return f"{target.table} AS m", scope_sql(target, filters, where_params, "m.", role_test, owned_test)
    inner = scope_sql(target, filters, from_params, "", role_test, owned_test)
    condition = " WHERE " + " AND ".join(inner) if inner else ""
    from_params.append(filters.scan_rows)
    return f"(SELECT * FROM {target.table}{condition} ORDER BY seq DESC LIMIT %s) AS m", []


def scope_sql(
    target: Target,
    filters: Filters,
    params: list,
    alias: str,
    role_test: RoleTest,
    owned_test: Callable[[str, str], str] = in_subquery,
) -> list[str]:
    """Conditions for the scope value and (where the target has one) the role filter."""
    where = []
    if filters.scope is not None:
        where.append(f"{alias}{target.scope} = %s")
        params.append(filters.scope)
    if filters.owner is not None and target.owned_scopes:
        where.append(owned_test(f"{alias}{target.scope}", target.owned_scopes))
        params.append(filters.owner)
    if filters.roles is not None and target.has_role:
        where.append(role_test(f"{alias}role", filters.roles, params))
    return where
