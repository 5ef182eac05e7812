"""The SQL of path walks: the latest leaf, the root-ward walk and the recent suffix, per vendor.

Plain strings and the parameters they take, no Django models: the provider
(:mod:`agent_sessions.storage.orm`) and the querysets (``Message.objects...path()``)
both build on them.
"""

from __future__ import annotations

from .. import conf

# The latest leaf is the newest childless row, and the newest row almost always is
# one (a child is always inserted after its parent).  So look among the newest few
# rows first (an ordered index walk of (session_id, seq) that stops after 8 rows),
# and only if none of them is childless search the whole session.  Both arms give
# the same row when the first finds one; LIMIT 1 stops before the second runs.
# The first arm orders by the inner scan's own key, ``(session_id, seq)``, so Postgres
# keeps the index order and probes children row by row until the first childless one
# (usually the newest); ordered by ``seq`` alone it sorted the eight rows, and so probed all
# eight first (docs/performance.md, A4).
# Written so that no planner estimate can turn it into a whole-session scan: with
# NOT EXISTS, or with the child probe as a filter on the full ordered scan,
# Postgres picked bitmap-scan-and-sort plans (O(session) per append) whenever its
# statistics were stale.
_CHILDLESS = (
    "(SELECT 1 FROM assistant_messages c WHERE c.session_id = {t}.session_id AND c.parent_id = {t}.id LIMIT 1) IS NULL"
)
# The session is named as a range of one value, ``session_id BETWEEN %s AND %s``, ordered by
# ``(session_id, seq)``: only the primary key can deliver that order.  With ``session_id = %s
# ORDER BY seq`` Postgres may walk the plain ``seq`` index backwards filtering on session_id
# whenever the session looks like a large share of the table, reading other sessions' rows
# to find the newest 8 (docs/performance.md, G1).
SESSION_RANGE = "{t}session_id >= %s AND {t}session_id <= %s"
# (The spacing is the installed append function's: its body is generated from these strings.)
_NEWEST_ARM = (
    "SELECT w.* FROM ("
    "      SELECT {inner} FROM assistant_messages WHERE "
    + SESSION_RANGE.format(t="")
    + " ORDER BY session_id DESC, seq DESC LIMIT 8"
    "    ) w WHERE " + _CHILDLESS.format(t="w") + " ORDER BY w.session_id DESC, w.seq DESC LIMIT 1"
)
_LATEST_LEAF_TEMPLATE = (
    "SELECT {cols} FROM ("
    "  SELECT * FROM (    " + _NEWEST_ARM + "  ) newest"
    "  UNION ALL"
    "  SELECT * FROM ("
    "    SELECT {inner} FROM assistant_messages m WHERE "
    + SESSION_RANGE.format(t="m.")
    + " AND "
    + _CHILDLESS.format(t="m")
    + "    ORDER BY m.session_id DESC, m.seq DESC LIMIT 1"
    "  ) anywhere"
    ") leaf LIMIT 1"
)
LEAF_COLUMNS = "seq, id, session_id, depth, path_tokens"
# The first arm alone, for reads that can fall back when it finds nothing: the range reads
# (storage/range_reads.py) to a walk, the client's latest-leaf reads (storage/orm.py) to the
# whole lookup.  A client's statement is planned at every call on Postgres, and the second arm
# nearly doubles that planning (docs/performance.md, R5).
_NEWEST_LEAF_TEMPLATE = "SELECT {cols} FROM (" + _NEWEST_ARM + ") leaf"
# What each lookup returns, the same in its whole form (LATEST_*) and its first arm (NEWEST_*),
# so that a read falling back from one to the other gets the same columns.
_ID_DEPTH_TOKENS = {"cols": "leaf.id, leaf.depth, leaf.path_tokens", "inner": LEAF_COLUMNS}
_CONTENT = {"cols": "leaf.content", "inner": LEAF_COLUMNS + ", content"}
_SEQ_DEPTH_ID = {"cols": "leaf.seq, leaf.depth, leaf.id", "inner": LEAF_COLUMNS}
_SEQ_CONTENT = {"cols": "leaf.seq, leaf.content", "inner": LEAF_COLUMNS + ", content"}

LATEST_LEAF = _LATEST_LEAF_TEMPLATE.format(**_ID_DEPTH_TOKENS)
"""Latest leaf ``(id, depth, path_tokens)``; parameters: :func:`latest_leaf_params`."""
LATEST_LEAF_CONTENT = _LATEST_LEAF_TEMPLATE.format(**_CONTENT)
"""Latest leaf ``(content,)``; parameters: :func:`latest_leaf_params`."""
NEWEST_LEAF = _NEWEST_LEAF_TEMPLATE.format(**_ID_DEPTH_TOKENS)
"""As :data:`LATEST_LEAF` when the leaf is among the session's newest 8 rows (nearly always: a
child is stored after its parent), else no row; parameters: :func:`newest_leaf_params`."""
NEWEST_LEAF_CONTENT = _NEWEST_LEAF_TEMPLATE.format(**_CONTENT)
"""As :data:`LATEST_LEAF_CONTENT` when the leaf is among the newest 8 rows, else no row."""
LATEST_LEAF_SEQ_CONTENT = _LATEST_LEAF_TEMPLATE.format(**_SEQ_CONTENT)
"""Latest leaf ``(seq, content)``; parameters: :func:`latest_leaf_params`."""
NEWEST_LEAF_SEQ = _NEWEST_LEAF_TEMPLATE.format(**_SEQ_DEPTH_ID)
"""The latest leaf ``(seq, depth, id)`` when it is among the newest 8 rows, else no row."""


def latest_leaf_params(session_id: str) -> list[str]:
    """Parameters of :data:`LATEST_LEAF` (the session id, twice per arm)."""
    return [session_id] * 4


def newest_leaf_params(session_id: str) -> list[str]:
    """Parameters of the ``NEWEST_LEAF*`` lookups (the session id, twice)."""
    return [session_id] * 2


# Each step of a walk finds the parent by this injective key (length-prefixed
# session id, then id) alone, through the unique index ``assistant_msg_path_key``
# on (key, session_id).  No other index can serve that predicate, so the step is
# an index probe whatever the statistics say: with ``m.session_id = … AND m.id = …``
# (a constant or a carried session id alike) Postgres, believing a freshly loaded
# session had one row, scanned the whole session at every step (docs/performance.md,
# G3).  The parameter is :func:`path_key_prefix`.
PATH_KEY = "CAST(length({t}session_id) AS TEXT) || ':' || {t}session_id || {t}id"


def path_key_prefix(session_id: str) -> str:
    """The session's part of the walk key: ``"<length>:<session id>"`` (the id follows)."""
    return f"{len(session_id)}:{session_id}"


# One step: the row whose key is the prefix plus the current row's parent_id, as ``m``.
# Postgres gets a LATERAL probe: it cannot be turned into a hash join over the whole
# table, which is what the planner picked on small hash-partitioned tables (a join
# against every partition looks dear before run-time pruning).  SQLite has no LATERAL
# and always probes the index.
_STEP = {
    "sqlite": "FROM path JOIN assistant_messages m ON " + PATH_KEY.format(t="m.") + " = %s || path.parent_id",
    "postgresql": (
        "FROM path CROSS JOIN LATERAL (SELECT s.seq, s.session_id, s.parent_id, s.content, s.tokens"
        " FROM assistant_messages s"
        " WHERE " + PATH_KEY.format(t="s.") + " = %s || path.parent_id LIMIT 1) m"
    ),
}

# What stops a walk on any stored tree: a parent stored before its child (every row this
# library writes) is always a step down in ``seq``, and steps down alone cannot go round; a
# step to a parent stored later (an import written leaf first) or to itself is taken only
# while the walk is shorter than the session has rows, which no simple path can exceed.  A
# parent cycle always has such a step (its seqs cannot all fall), so a walk into one stops
# after at most twice the session's rows and the readers cut it at the first repeated row
# (:func:`agent_sessions.storage.cycles.root_first`).  The count is an uncorrelated subquery,
# run once per statement and only at such a step: the usual walk never runs it.  Parameter:
# the session id.
ROWS_BOUND = (
    "(m.seq < path.seq OR path.n < (SELECT count(*) FROM assistant_messages every_row WHERE every_row.session_id = %s))"
)

# Root-ward walk from a leaf, carrying only keys; ``n`` is the distance from
# the leaf.  The depth guard is ``MAX_PATH_DEPTH``; the cycle guard ``ROWS_BOUND``.
_PATH_TEMPLATE = (
    "WITH RECURSIVE path(seq, sid, parent_id, n) AS ("
    "  SELECT seq, session_id, parent_id, 0 FROM assistant_messages WHERE session_id = %s AND id = {leaf}"
    "  UNION ALL"
    "  SELECT m.seq, m.session_id, m.parent_id, path.n + 1 {step} WHERE path.n < %s AND " + ROWS_BOUND + ") "
)

# Recent suffix: the walk stops one row after the byte budget is spent.
_RECENT_TEMPLATE = (
    "WITH RECURSIVE path(seq, sid, parent_id, n, total) AS ("
    "  SELECT seq, session_id, parent_id, 0, {{bytes}} FROM assistant_messages WHERE session_id = %s AND id = {leaf}"
    "  UNION ALL"
    "  SELECT m.seq, m.session_id, m.parent_id, path.n + 1, path.total + {{mbytes}} {step}"
    "  WHERE path.n < %s AND " + ROWS_BOUND + " AND (path.n < %s OR path.total <= %s)"
    ") "
)

# A copy's walk (a fork): besides the keys, each row's token total from the leaf up to it
# (``acc``, bigint on Postgres) and two random values, its own (``h``) and its parent's
# (``parent_h``, which the next step takes as its ``h``).  The copies' parents, depths and
# running totals then follow from one row each, with no window over the path: SQLite's
# ``lag() OVER`` sort cost a quarter of a 10k-message fork.  ``{{random}}``: the vendor's
# random hex (one value per row).
_COPY_TEMPLATE = (
    "WITH RECURSIVE path(seq, sid, parent_id, n, acc, h, parent_h) AS ("
    "  SELECT seq, session_id, parent_id, 0, CAST(tokens AS BIGINT), {{random}}, {{random}} FROM assistant_messages"
    "  WHERE session_id = %s AND id = {leaf}"
    "  UNION ALL"
    "  SELECT m.seq, m.session_id, m.parent_id, path.n + 1, path.acc + m.tokens, path.parent_h, {{random}} {step}"
    "  WHERE path.n < %s AND " + ROWS_BOUND + ") "
)

# The same walks may start from the latest leaf, found inside the same query
# (one round trip instead of two); parameters: latest_leaf_params() in place of the leaf id.
_LATEST_ID = "(SELECT latest.id FROM (" + LATEST_LEAF + ") latest)"


def _walks(template: str) -> dict[tuple[str, bool], str]:
    return {
        (vendor, latest): template.format(leaf=_LATEST_ID if latest else "%s", step=step)
        for vendor, step in _STEP.items()
        for latest in (False, True)
    }


_PATH_CTES = _walks(_PATH_TEMPLATE)
_RECENT_CTES = _walks(_RECENT_TEMPLATE)
_COPY_CTES = _walks(_COPY_TEMPLATE)


def path_cte(vendor: str, *, latest: bool = False) -> str:
    """The root-ward walk CTE ``path(seq, sid, parent_id, n)``; parameters: :func:`walk_params`.

    On a parent cycle the walk goes round until ``ROWS_BOUND`` stops it: its rows then repeat,
    and a reader keeps those before the first repeat."""
    return _PATH_CTES[vendor, latest]


def copy_cte(vendor: str, random_hex: str) -> str:
    """The root-ward walk CTE ``path(seq, sid, parent_id, n, acc, h, parent_h)`` of a copy (see
    ``_COPY_TEMPLATE``); parameters as :func:`path_cte`'s."""
    return _COPY_CTES[vendor, False].format(random=random_hex)


def recent_cte(vendor: str, *, latest: bool = False) -> str:
    """The walk that stops past a byte budget (``{bytes}``/``{mbytes}`` still to fill)."""
    return _RECENT_CTES[vendor, latest]


HAS_OVERLAYS = "(SELECT 1 FROM assistant_compactions o WHERE o.session_id = %s LIMIT 1)"
"""1 when the session has any compaction overlay, else NULL (parameter: the session id)."""

# Joins a walk's rows back to their content, by the primary key (session_id, seq).
PATH_ROW = "m.session_id = path.sid AND m.seq = path.seq"


def walk_params(session_id: str, leaf_id: str | None) -> list:
    """The parameters of a walk from ``leaf_id`` (None: the latest leaf): the session, the leaf (or
    :func:`latest_leaf_params`), :func:`path_key_prefix`, the depth limit, the session (``ROWS_BOUND``)."""
    leaf = [leaf_id] if leaf_id is not None else latest_leaf_params(session_id)
    return [session_id, *leaf, path_key_prefix(session_id), conf.max_path_depth(), session_id]


def walk(vendor: str, session_id: str, leaf_id: str | None) -> tuple[str, list]:
    """The root-ward walk CTE ``path(seq, sid, parent_id, n)`` from ``leaf_id`` (None: the latest leaf)
    and its parameters; ``n`` is 0 at the leaf.  Follow it with a SELECT over ``path``."""
    return path_cte(vendor, latest=leaf_id is None), walk_params(session_id, leaf_id)


def first_seen_path(vendor: str, session_id: str, leaf_id: str | None) -> tuple[str, list]:
    """A walk as ``(seq, n)`` rows, each row once at its first distance ``n`` from the leaf: on a parent
    cycle (the walk goes round until its bound) that is the path up to the first repeated row.  A
    subquery for :meth:`agent_sessions.querysets.MessageQuerySet.path` to join."""
    sql, params = walk(vendor, session_id, leaf_id)
    return sql + "SELECT seq, min(n) AS n FROM path GROUP BY seq", params
