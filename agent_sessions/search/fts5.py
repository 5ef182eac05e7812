"""Compile a :class:`Query` into SQLite SQL over FTS5 (porter words + trigram substrings).

User text only ever appears as FTS5 *strings* (double-quoted, quotes doubled)
inside a bound MATCH argument, or as bound LIKE/instr operands: never as
FTS5 or SQL syntax.
"""

from __future__ import annotations

from django.db import DatabaseError

from .plan import EXTRA_WEIGHT, RANK_TYPE, Filters, Split, Target, occurrences_sql, scope_source, snippet_columns, split
from .query import AnyOf, Query, Term
from .snippet import ELLIPSIS, START, STOP

_PROBE = "agent_sessions_stem_probe"
EMPTY = "''"

Variants = dict[str, tuple[str, ...]]


def fts_string(text: str) -> str:
    """``text`` as one FTS5 string (a phrase of its tokens): no operator survives."""
    return '"' + text.replace('"', '""') + '"'


def _tokens(cursor, words: list[str]) -> list[list[str]]:
    """The porter tokens SQLite makes of each word, read back from a private temp FTS5 table."""
    cursor.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_PROBE} USING fts5(w, tokenize='porter unicode61')")
    cursor.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_PROBE}_v USING fts5vocab(temp, {_PROBE}, 'instance')")
    cursor.executemany(f"INSERT INTO temp.{_PROBE}(rowid, w) VALUES (%s, %s)", list(enumerate(words)))
    cursor.execute(f'SELECT doc, term FROM temp.{_PROBE}_v ORDER BY doc, "offset"')
    rows = cursor.fetchall()
    cursor.execute(f"DELETE FROM temp.{_PROBE}")
    tokens: list[list[str]] = [[] for _ in words]
    for doc, term in rows:
        tokens[doc].append(term)
    return tokens


_VARIANTS: dict[str, tuple[str, ...]] = {}
_VARIANTS_MAX = 20_000  # words remembered per process (the tokenizer is deterministic)


def _probe_variants(cursor, words: list[str]) -> dict[str, tuple[str, ...]]:
    stems = _tokens(cursor, words)
    wanted: dict[str, tuple[str, str]] = {}
    for word, toks in zip(words, stems, strict=True):
        if len(toks) == 1 and len(toks[0]) > 2 and toks[0][-1] in "iy":
            base = toks[0][:-1]
            wanted[word] = (base + "yness", base + "y") if toks[0][-1] == "i" else (base + "ies", base + "i")
    checked = _tokens(cursor, [c for c, _ in wanted.values()]) if wanted else []
    found = {w: (c,) for (w, (c, alt)), toks in zip(wanted.items(), checked, strict=True) if toks == [alt]}
    return {w: found.get(w, ()) for w in words}


def stem_variants(cursor, query: Query) -> Variants:
    """Extra query words that undo the Porter stemmer's y/i split, per word.

    Porter stems ``deploy``/``deploying`` to ``deploi`` but ``deployment`` to
    ``deploy``; a word whose stem ends in ``i`` (or ``y``) also matches the
    other spelling, through a word that stems to it (``…yness`` / ``…ies``),
    checked against SQLite's own tokenizer (cached). Best effort: none on error.
    """
    words = {t.text for t in [*query.terms, *query.excluded] if not t.cjk and not t.phrase}
    missing = sorted(w for w in words if w not in _VARIANTS)
    if missing:
        try:
            probed = _probe_variants(cursor, missing)
        except DatabaseError:
            return {}
        if len(_VARIANTS) + len(probed) > _VARIANTS_MAX:
            _VARIANTS.clear()
        _VARIANTS.update(probed)
    return {w: _VARIANTS[w] for w in words if _VARIANTS.get(w)}


def _any(terms: tuple[Term, ...] | list[Term], variants: Variants) -> str:
    strings = [fts_string(s) for t in terms for s in (t.text, *variants.get(t.text, ()))]
    return "(" + " OR ".join(strings) + ")"


def _all(groups: tuple[AnyOf, ...], variants: Variants) -> str:
    return " AND ".join(_any(g.terms, variants) for g in groups)


def _contains(text_col: str, term: Term) -> str:
    return f"instr({text_col}, %s) > 0" if term.caseless else f"instr(lower({text_col}), lower(%s)) > 0"


def _contains_any(target: Target, term: Term, params: list) -> str:
    """``term`` is a substring of the text column or of the ``extra`` one (binds into ``params``)."""
    columns = [f"COALESCE(m.{c}, {EMPTY})" for c in (target.text, target.extra) if c]
    params.extend([term.text] * len(columns))
    return "(" + " OR ".join(_contains(c, term) for c in columns) + ")"


def _bm25(table: str, target: Target) -> str:
    """FTS5 rank of a row; a match in the ``extra`` column counts ``EXTRA_WEIGHT`` of one in the text."""
    return f"bm25({table}, 1.0, {EXTRA_WEIGHT})" if target.extra else f"bm25({table})"


def _other_group(group: AnyOf, target: Target, params: list, variants: Variants) -> str:
    """A mixed group: one IN over both indexes, or per-term tests when a term is short."""
    words = [t for t in group.terms if not t.cjk]
    subs = [t for t in group.terms if t.cjk and not t.short]
    short = [t for t in group.terms if t.short]
    selects = []
    if words:
        selects.append(f"SELECT rowid FROM {target.fts} WHERE {target.fts} MATCH %s")
        params.append(_any(words, variants))
    if subs:
        selects.append(f"SELECT rowid FROM {target.trigram} WHERE {target.trigram} MATCH %s")
        params.append(_any(subs, {}))
    tests = [f"m.seq IN ({' UNION '.join(selects)})"] if selects else []
    tests.extend(_contains_any(target, term, params) for term in short)
    return "(" + " OR ".join(tests) + ")"


def _exact_group(group: AnyOf, target: Target, params: list, variants: Variants) -> str:
    """For a group with a compound term (``db-replica-3``): a hit contains one alternative as such.

    FTS5 matches a compound as the phrase of its tokens (``db replica 3``), which prose and
    other punctuation also make; the term itself must be a substring of the text or tool text.
    Empty when no alternative is compound (the index alone is exact)."""
    if not any(t.compound for t in group.terms):
        return ""
    tests = []
    for term in group.terms:
        if term.compound:
            tests.append(_contains_any(target, Term(term.core), params))
        elif term.cjk:
            tests.append(_contains_any(target, term, params))
        else:
            tests.append(f"m.seq IN (SELECT rowid FROM {target.fts} WHERE {target.fts} MATCH %s)")
            params.append(_any([term], variants))
    return "(" + " OR ".join(tests) + ")"


def _roles_in(column: str, roles: tuple[str, ...], params: list) -> str:
    params.extend(roles)
    return f"{column} IN ({', '.join(['%s'] * len(roles))})" if roles else "1 = 0"


def compile_query(cursor, query: Query, target: Target, filters: Filters) -> tuple[str, list]:
    """``(sql, params)`` selecting ``target.columns`` plus a snippet column (or NULL)."""
    parts: Split = split(query)
    variants = stem_variants(cursor, query)
    word_expr = _all(parts.words, variants)
    if word_expr and parts.excluded_words:
        word_expr = f"({word_expr}) NOT {_any(parts.excluded_words, variants)}"
    sub_expr = _all(parts.substrings, {})

    select_params: list = []
    if filters.snippets and (word_expr or sub_expr):
        table, tokens = (target.fts, 12) if word_expr else (target.trigram, 32)
        column = -1 if target.extra else 0  # -1: the column that matched best
        snippet = f"snippet({table}, {column}, %s, %s, %s, {tokens})"
        select_params += [START, STOP, ELLIPSIS]
    else:
        snippet = "NULL"
    columns = ", ".join(f"m.{c}" for c in target.columns)
    after_snippet = snippet_columns(target, filters, "m.")

    from_params: list = []
    where_params: list = []
    source, where = scope_source(
        target, filters, _roles_in, indexed=parts.indexed, from_params=from_params, where_params=where_params
    )
    if word_expr:
        source += f" JOIN {target.fts} ON {target.fts}.rowid = m.seq"
        where.insert(0, f"{target.fts} MATCH %s")
        where_params.insert(0, word_expr)
    if sub_expr:
        source += f" JOIN {target.trigram} ON {target.trigram}.rowid = m.seq"
        at = 1 if word_expr else 0
        where.insert(at, f"{target.trigram} MATCH %s")
        where_params.insert(at, sub_expr)
    for group in parts.other:
        where.append(_other_group(group, target, where_params, variants))
    for group in (*parts.words, *parts.other):
        exact = _exact_group(group, target, where_params, variants)
        if exact:
            where.append(exact)
    if parts.excluded_words and not word_expr:
        where.append(f"m.seq NOT IN (SELECT rowid FROM {target.fts} WHERE {target.fts} MATCH %s)")
        where_params.append(_any(parts.excluded_words, variants))
    for term in parts.excluded_substrings:
        where.append(f"NOT {_contains_any(target, term, where_params)}")

    if filters.keys:
        return f"SELECT m.{filters.keys} FROM {source}" + (" WHERE " + " AND ".join(where) if where else ""), [
            *from_params,
            *where_params,
        ]

    order, order_params = [], []
    ranks = [_bm25(t, target) for t, used in ((target.fts, word_expr), (target.trigram, sub_expr)) if used]
    needles = [t for t in query.terms if t.cjk]
    if ranks:
        order.append(" + ".join(ranks))
        rank = f"-({' + '.join(ranks)})"
    elif needles:
        rank = occurrences_sql(f"m.{target.text}", needles, "max")
        order.append(rank + " DESC")
        order_params += [n.text for n in needles for _ in range(2)]
    else:
        rank = "0"
    order.append("m.seq")
    if filters.ranked:
        snippet += f", CAST({rank} AS {RANK_TYPE}) AS rank"
        if not ranks:
            select_params += [n.text for n in needles for _ in range(2)]

    sql = (
        f"SELECT {columns}, {snippet}{after_snippet} FROM {source}"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY "
        + ", ".join(order)
        + " LIMIT %s OFFSET %s"
    )
    params = select_params + from_params + where_params + order_params + [filters.limit, filters.offset]
    return sql, params
