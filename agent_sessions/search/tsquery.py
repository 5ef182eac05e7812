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
    """A word's tsquery; a phrase's or a compound term's keeps its tokens adjacent (``<->``).

    The default parser indexes ``db-replica-3`` as ``db-replica``, ``db``, ``replica``, ``3``
    in a row (``v1.2.3`` and ``a@b.io`` as one token each): ANDing them would match the
    parts anywhere."""
    if term.compound:
        params += [config, term.core]
        return "phraseto_tsquery(%s::regconfig, %s)"
    params += [config, term.text]
    return f"{'phraseto_tsquery' if term.phrase else 'plainto_tsquery'}(%s::regconfig, %s)"


def _contains(target: Target, term: Term, params: list) -> str:
    """``term``'s core is a substring (any case) of the text column or the ``extra`` one."""
    columns = [c for c in (target.text, target.extra) if c]
    params.extend([like_pattern(term.core)] * len(columns))
    return "(" + " OR ".join(f"COALESCE(m.{c}, '') ILIKE %s" for c in columns) + ")"


def _exact_group(group: AnyOf, target: Target, config: str, params: list) -> str:
    """For a group with a compound term: a hit contains one alternative as such (empty otherwise).

    The tsquery finds the compound's tokens in a row, which ``db-replica 3`` also makes;
    the term itself must be a substring of the text or tool text."""
    if not any(t.compound for t in group.terms):
        return ""
    tests = []
    for term in group.terms:
        if term.compound:
            tests.append(_contains(target, term, params))
        elif term.cjk:
            tests.append(_substring(target, term, params))
        else:
            tests.append(f"{target.tsv_sql('m.')} @@ {_term(term, config, params)}")
    return "(" + " OR ".join(tests) + ")"


def _any(terms: tuple[Term, ...] | list[Term], config: str, params: list) -> str:
    return "(" + " || ".join(_term(t, config, params) for t in terms) + ")"


def _ilike(text_col: str, term: Term, params: list, negate: bool = False) -> str:
    params.append(like_pattern(term.text))
    op = "LIKE" if term.caseless else "ILIKE"
    return f"{text_col} {'NOT ' if negate else ''}{op} %s"


def _substring(target: Target, term: Term, params: list, negate: bool = False) -> str:
    """``term`` is (``negate``: is not) a substring of the text column or the ``extra`` one.

    Each test also states that the column is not all ASCII (a substring term never is),
    which lets Postgres use the partial trigram indexes of the messages' columns.
    """
    columns = [c for c in (target.text, target.extra) if c]
    if negate:
        tests = [_ilike(f"COALESCE(m.{c}, '')", term, params, negate=True) for c in columns]
        return "(" + " AND ".join(tests) + ")"
    tests = []
    for column in columns:
        not_ascii = f"octet_length(m.{column}) <> char_length(m.{column})"
        tests.append(f"({not_ascii} AND {_ilike(f'm.{column}', term, params)})")
    return "(" + " OR ".join(tests) + ")"


def _other_group(group: AnyOf, target: Target, config: str, params: list) -> str:
    tests = []
    for term in group.terms:
        if term.cjk:
            tests.append(_substring(target, term, params))
        else:
            tests.append(f"{target.tsv_sql('m.')} @@ {_term(term, config, params)}")
    return "(" + " OR ".join(tests) + ")"


def _role_any(column: str, roles: tuple[str, ...], params: list) -> str:
    params.append(list(roles))
    return f"{column} = ANY(%s)"


def _owned_any(column: str, subquery: str) -> str:
    """The owner's scopes as an array computed once (an InitPlan), tested on each hit, never used to probe an index.

    As a condition of the ``(session_id, content_tsv)`` GIN index, ``= ANY`` runs one GIN scan per owned
    session, and every GIN scan reads the index's whole pending list (docs/performance.md, S1).
    ``|| ''`` hides the column from the index, so an owner's search costs what the all-sessions
    search does, whatever the number of sessions owned.
    ``IN (subquery)`` drew the same per-session plan as a join."""
    return f"({column} || '') = ANY(ARRAY({subquery}))"


def compile_query(query: Query, target: Target, filters: Filters, config: str) -> tuple[str, list]:
    """``(sql, params)`` selecting ``target.columns`` plus a snippet column (or NULL).

    The tsquery is written out (bound text, immutable functions) wherever it is used,
    rather than computed once in a CTE: the planner folds it into a constant and reads
    the column's statistics for it, so a common word in one session walks that session's
    rows instead of the word's whole GIN posting list (see docs/scaling.md).
    """
    parts = split(query)
    pos_params: list = []
    positive = " && ".join(_any(g.terms, config, pos_params) for g in parts.words)
    tsq, tsq_params = "", []
    if positive:
        tsq, tsq_params = f"({positive})", list(pos_params)
        if parts.excluded_words:
            tsq = f"({positive} && !!{_any(parts.excluded_words, config, tsq_params)})"

    def q(params: list) -> str:
        """The tsquery, its bound text appended to ``params``."""
        params += tsq_params
        return tsq

    from_params: list = []
    where_params: list = []
    source, where = scope_source(
        target,
        filters,
        _role_any,
        indexed=parts.indexed,
        from_params=from_params,
        where_params=where_params,
        owned_test=_owned_any,
    )
    if tsq:
        # Nothing matches when every required word is a stop word (rather than
        # ``!!excluded`` alone matching nearly everything); a constant test.
        lead: list = [*pos_params]
        where[:0] = [f"numnode({positive}) > 0", f"{target.tsv_sql('m.')} @@ {q(lead)}"]
        where_params[:0] = lead
    for group in parts.substrings:
        where.append("(" + " OR ".join(_substring(target, t, where_params) for t in group.terms) + ")")
    for group in parts.other:
        where.append(_other_group(group, target, config, where_params))
    for group in (*parts.words, *parts.other):
        exact = _exact_group(group, target, config, where_params)
        if exact:
            where.append(exact)
    if parts.excluded_words and not tsq:
        where.append(
            f"NOT COALESCE({target.tsv_sql('m.')} @@ {_any(parts.excluded_words, config, where_params)}, false)"
        )
    for term in parts.excluded_substrings:
        where.append(_substring(target, term, where_params, negate=True))

    if filters.keys:
        return f"SELECT m.{filters.keys} FROM {source}" + (" WHERE " + " AND ".join(where) if where else ""), [
            *from_params,
            *where_params,
        ]

    ranks: list[str] = []
    rank_params: list[object] = []
    if tsq:
        # The text is weight A, the extra column weight D (content_tsv as the initial migration builds it).
        weights = f"'{{{EXTRA_WEIGHT}, 0.2, 0.4, 1.0}}'::float4[], " if target.extra else ""
        ranks.append(f"ts_rank_cd({weights}{target.tsv_sql('m.')}, {q(rank_params)}, 1)")
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
        headline_params.append(config)
        shown = f"hit.{target.text}"
        if target.extra:
            # A hit whose words are only in the extra column (tool text) is excerpted from there.
            headline_params.append(config)
            shown = (
                f"CASE WHEN hit.{target.extra} <> '' AND NOT to_tsvector(%s::regconfig, hit.{target.text}) "
                f"@@ {q(headline_params)} THEN hit.{target.extra} ELSE hit.{target.text} END"
            )
        headline = f"ts_headline(%s::regconfig, {shown}, {q(headline_params)}, %s)"
        headline_params.append(HEADLINE_OPTIONS)
    else:
        headline = "NULL"
    if filters.ranked:
        total = " + ".join(f"hit.r{i}" for i in range(len(ranks))) or "0"
        headline += f", CAST({total} AS {RANK_TYPE}) AS rank"
    sql = (
        f"SELECT {hit_columns}, {headline}{snippet_columns(target, filters, 'hit.')} FROM ({inner_sql}) hit"
        " ORDER BY " + "".join(f"hit.r{i} DESC, " for i in range(len(ranks))) + "hit.seq"
    )
    return sql, headline_params + params
