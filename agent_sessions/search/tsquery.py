"""Compile a :class:`Query` into Postgres SQL: a tsquery built from bound text, plus pg_trgm substrings.

Each word goes through ``plainto_tsquery`` and each phrase through
``phraseto_tsquery`` (both parse their argument as plain text, never as
tsquery syntax); the results are combined with the tsquery operators
``&&``, ``||`` and ``!!`` in SQL. CJK terms become ``ILIKE '%…%'`` tests
(escaped, bound) that a ``gin_trgm_ops`` index serves.
"""

from __future__ import annotations

from .plan import (
    EXTRA_WEIGHT,
    RANK_TYPE,
    Filters,
    Target,
    like_pattern,
    occurrences_sql,
    scope_source,
    snippet_columns,
    split,
)
from .query import AnyOf, Query, Term
from .snippet import ELLIPSIS, START, STOP

HEADLINE_OPTIONS = (
    f'StartSel="{START}", StopSel="{STOP}", MaxWords=24, MinWords=8, ShortWord=2, '
    f'MaxFragments=2, FragmentDelimiter=" {ELLIPSIS} "'
)


def _term(term: Term, config: str, params: list) -> str:
    params += [config, term.text]
    return f"{'phraseto_tsquery' if term.phrase else 'plainto_tsquery'}(%s::regconfig, %s)"


def _any(terms: tuple[Term, ...] | list[Term], config: str, params: list) -> str:
    return "(" + " || ".join(_term(t, config, params) for t in terms) + ")"


def _ilike(text_col: str, term: Term, params: list, negate: bool = False) -> str:
    params.append(like_pattern(term.text))
    op = "LIKE" if term.caseless else "ILIKE"
    return f"{text_col} {'NOT ' if negate else ''}{op} %s"


def _substring(target: Target, term: Term, params: list, negate: bool = False) -> str:
    """``term`` is (``negate``: is not) a substring of the text column or the ``extra`` one.

    The ``extra`` test also states that the column is not all ASCII (a substring term never
    is), which lets Postgres use the partial trigram index of that column.
    """
    columns = [c for c in (target.text, target.extra) if c]
    if negate:
        tests = [_ilike(f"COALESCE(m.{c}, '')", term, params, negate=True) for c in columns]
        return "(" + " AND ".join(tests) + ")"
    tests = [_ilike(f"m.{target.text}", term, params)]
    if target.extra:
        ascii_only = f"octet_length(m.{target.extra}) <> char_length(m.{target.extra})"
        tests.append(f"({ascii_only} AND {_ilike(f'm.{target.extra}', term, params)})")
    return "(" + " OR ".join(tests) + ")"


def _other_group(group: AnyOf, target: Target, config: str, params: list) -> str:
    tests = []
    for term in group.terms:
        if term.cjk:
            tests.append(_substring(target, term, params))
        else:
            tests.append(f"m.{target.tsv} @@ {_term(term, config, params)}")
    return "(" + " OR ".join(tests) + ")"


def _role_any(column: str, roles: tuple[str, ...], params: list) -> str:
    params.append(list(roles))
    return f"{column} = ANY(%s)"


def compile_query(query: Query, target: Target, filters: Filters, config: str) -> tuple[str, list]:
    """``(sql, params)`` selecting ``target.columns`` plus a snippet column (or NULL)."""
    parts = split(query)
    tsq_params: list = []
    pos_params: list = []
    positive = " && ".join(_any(g.terms, config, pos_params) for g in parts.words)
    tsq = ""
    if positive:
        # ``keep`` is false when every required word is a stop word: then nothing
        # matches (rather than ``!!excluded`` alone matching nearly everything).
        negative = f" && !!{_any(parts.excluded_words, config, tsq_params)}" if parts.excluded_words else ""
        tsq = f"SELECT pos.p{negative} AS q, numnode(pos.p) > 0 AS keep FROM (SELECT {positive} AS p) pos"
        tsq_params += pos_params

    from_params: list = []
    where_params: list = []
    source, where = scope_source(
        target, filters, _role_any, indexed=parts.indexed, from_params=from_params, where_params=where_params
    )
    if tsq:
        source += ", q"
        where[:0] = ["q.keep", f"m.{target.tsv} @@ q.q"]
    for group in parts.substrings:
        where.append("(" + " OR ".join(_substring(target, t, where_params) for t in group.terms) + ")")
    for group in parts.other:
        where.append(_other_group(group, target, config, where_params))
    if parts.excluded_words and not tsq:
        where.append(f"NOT COALESCE(m.{target.tsv} @@ {_any(parts.excluded_words, config, where_params)}, false)")
    for term in parts.excluded_substrings:
        where.append(_substring(target, term, where_params, negate=True))

    ranks, rank_params = [], []
    if tsq:
        # The text is weight A, the extra column weight D (see the vendor's tool_text_index_sql).
        weights = f"'{{{EXTRA_WEIGHT}, 0.2, 0.4, 1.0}}'::float4[], " if target.extra else ""
        ranks.append(f"ts_rank_cd({weights}m.{target.tsv}, q.q, 1)")
    needles = [t for t in query.terms if t.cjk]
    if needles:
        ranks.append(occurrences_sql(f"m.{target.text}", needles, "greatest"))
        rank_params += [n.text for n in needles for _ in range(2)]
    rank_cols = "".join(f", {r} AS r{i}" for i, r in enumerate(ranks))
    order = "".join(f"r{i} DESC, " for i in range(len(ranks)))

    columns = ", ".join(f"m.{c}" for c in target.columns)
    inner_sql = (
        f"SELECT {columns}{snippet_columns(target, filters, 'm.')}{'' if 'seq' in target.columns else ', m.seq'}"
        f"{rank_cols} FROM {source}"
        + (" WHERE " + " AND ".join(where) if where else "")
        + f" ORDER BY {order}m.seq LIMIT %s OFFSET %s"
    )
    params = rank_params + from_params + where_params + [filters.limit, filters.offset]

    hit_columns = ", ".join(f"hit.{c}" for c in target.columns)
    headline_params: list = []
    if tsq and filters.snippets:
        shown = f"hit.{target.text}"
        if target.extra:
            # A hit whose words are only in the extra column (tool text) is excerpted from there.
            shown = (
                f"CASE WHEN hit.{target.extra} <> '' AND NOT to_tsvector(%s::regconfig, hit.{target.text}) @@ q.q "
                f"THEN hit.{target.extra} ELSE hit.{target.text} END"
            )
            headline_params = [config]
        headline = f"ts_headline(%s::regconfig, {shown}, q.q, %s)"
        headline_params = [config, *headline_params, HEADLINE_OPTIONS]
    else:
        headline = "NULL"
    if filters.ranked:
        total = " + ".join(f"hit.r{i}" for i in range(len(ranks))) or "0"
        headline += f", CAST({total} AS {RANK_TYPE}) AS rank"
    sql = (
        f"SELECT {hit_columns}, {headline}{snippet_columns(target, filters, 'hit.')} FROM ({inner_sql}) hit"
        + (", q" if tsq else "")
        + " ORDER BY "
        + "".join(f"hit.r{i} DESC, " for i in range(len(ranks)))
        + "hit.seq"
    )
    params = headline_params + params
    if tsq:
        sql = f"WITH q AS MATERIALIZED ({tsq}) " + sql
        params = tsq_params + params
    return sql, params
