"""The benchmark's workloads (numbered as in bench/README.md), each measured for ours, raw SQL on the
same database, and peers."""

from __future__ import annotations

import json
import random
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections
from tqdm import tqdm

from agent_sessions.manager import SessionManager
from agent_sessions.session import Session
from agent_sessions.storage import appends, orm, postgres, range_reads, walks
from agent_sessions.tokens import estimate_one_message_tokens
from agent_sessions.types import dump_message, text_content, tool_text

from .harness import Result, binned, cpu_note, interleaved_medians, per_op_medians, timed

WORDS = [f"w{i:04d}" for i in range(3000)] + ["deploy", "friday", "database", "weather", "kyoto", "invoice"]


def message(i: int, text: str | None = None) -> dict:
    return {
        "id": f"m{i}",
        "role": "user" if i % 2 == 0 else "assistant",
        "parts": [{"type": "text", "text": text if text is not None else f"message {i} about the weather in kyoto"}],
    }


def peer_item(i: int) -> dict:
    m = message(i)
    return {"role": m["role"], "content": m["parts"][0]["text"]}


class Raw:
    """The practical floor: the same statements through the bare DB-API connection."""

    def __init__(self, alias: str) -> None:
        wrapper = connections[alias]
        wrapper.ensure_connection()
        self.vendor = wrapper.vendor
        self.conn = wrapper.connection

    def sql(self, text: str) -> str:
        return text.replace("%s", "?") if self.vendor == "sqlite" else text

    def now(self):
        now = datetime.now(UTC)
        return now.isoformat(sep=" ").replace("+00:00", "") if self.vendor == "sqlite" else now

    def execute(self, text: str, params=()):
        cur = self.conn.cursor()
        cur.execute(self.sql(text), params)
        return cur

    def append(self, session_id: str, m: dict) -> None:
        """Auto-parented append: the same INSERT … SELECT (and, on Postgres, lock) ours issues."""
        tokens = estimate_one_message_tokens(m)
        values = [m["id"], session_id, m["role"], dump_message(m), text_content(m), tool_text(m), self.now(), tokens]
        statement = appends.statement(None, auto=True)
        params = appends.params(values, session_id, None, auto=True)
        if self.vendor == "postgresql":
            # The lock and the insert in one simple-protocol query: one implicit transaction.
            psycopg.ClientCursor(self.conn).execute(
                postgres.LOCK + "; " + statement, [postgres.lock_key(session_id), *params]
            )
        else:
            self.execute(statement, params)

    def append_all(self, session_id: str, messages: list[dict]) -> None:
        rows, total, parent = [], 0, None
        for depth, m in enumerate(messages, start=1):
            tokens = estimate_one_message_tokens(m)
            total += tokens
            rows.append(
                (
                    m["id"],
                    session_id,
                    parent,
                    m["role"],
                    dump_message(m),
                    text_content(m),
                    self.now(),
                    tokens,
                    depth,
                    total,
                )
            )
            parent = m["id"]
        insert = self.sql(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content, created_at,"
            " tokens, depth, path_tokens) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        )
        if self.vendor == "postgresql":
            with self.conn.transaction():
                self.conn.cursor().executemany(insert, rows)
        else:
            self.conn.execute("BEGIN")
            self.conn.executemany(insert, rows)
            self.conn.execute("COMMIT")

    def plans(self) -> str:
        """How Postgres ran this connection's prepared statements so far: generic and custom plans."""
        generic, custom = self.execute(
            "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements"
        ).fetchone()
        return f"{generic} generic, {custom} custom"

    def leaf(self, session_id: str) -> str:
        return self.execute(walks.LATEST_LEAF, walks.latest_leaf_params(session_id)).fetchone()[0]

    def history(self, session_id: str, leaf: str | None = None) -> list[dict]:
        leaf = leaf or self.leaf(session_id)
        cur = self.execute(
            walks.path_cte(self.vendor) + "SELECT m.content FROM path "
            "JOIN assistant_messages m ON m.session_id = path.sid AND m.seq = path.seq "
            "ORDER BY path.n DESC",
            [session_id, leaf, walks.path_key_prefix(session_id), 10**9, session_id],
        )
        return [json.loads(r[0]) for r in cur.fetchall()]

    def _session_scan(self, direction: str) -> str:
        """The session's rows through the (session_id, seq) index: a one-value range on Postgres (the
        plain seq index could serve ORDER BY seq), the index named on SQLite (the rowid could)."""
        if self.vendor == "postgresql":
            where = "WHERE session_id >= %s AND session_id <= %s"
            return f"FROM assistant_messages {where} ORDER BY session_id {direction}, seq {direction}"
        where = "WHERE session_id = %s AND session_id = %s"
        return f"FROM assistant_messages INDEXED BY assistant_msg_sess_seq {where} ORDER BY seq {direction}"

    def history_range(self, session_id: str) -> list[dict]:
        """The floor of ours on a session that does not branch: its rows in seq order, one range scan."""
        cur = self.execute("SELECT content " + self._session_scan("ASC"), [session_id, session_id])
        return [json.loads(r[0]) for r in cur.fetchall()]

    def recent_range(self, session_id: str, n: int) -> list[dict]:
        """The n newest rows of a session that does not branch, one range scan."""
        cur = self.execute("SELECT content " + self._session_scan("DESC") + " LIMIT %s", [session_id, session_id, n])
        return [json.loads(r[0]) for r in reversed(cur.fetchall())]

    def recent(self, session_id: str, n: int) -> list[dict]:
        leaf = self.leaf(session_id)
        cur = self.execute(
            walks.path_cte(self.vendor).replace("WHERE path.n < %s", "WHERE path.n < %s AND path.n + 1 < " + str(n))
            + "SELECT m.content FROM path JOIN assistant_messages m ON m.session_id = path.sid AND m.seq = path.seq "
            "ORDER BY path.n DESC",
            [session_id, leaf, walks.path_key_prefix(session_id), 10**9, session_id],
        )
        return [json.loads(r[0]) for r in cur.fetchall()]

    def search(self, query: str, limit: int = 20) -> list:
        words = query.split()
        if self.vendor == "sqlite":
            cur = self.execute(
                "SELECT m.id, m.role, m.text_content, m.created_at, m.session_id FROM assistant_fts "
                "JOIN assistant_messages m ON m.seq = assistant_fts.rowid WHERE assistant_fts MATCH %s "
                "ORDER BY bm25(assistant_fts) LIMIT %s",
                [" ".join(f'"{w}"' for w in words), limit],
            )
        else:
            cur = self.execute(
                "SELECT m.id, m.role, m.text_content, m.created_at, m.session_id "
                "FROM assistant_messages m, plainto_tsquery('english', %s) q WHERE m.content_tsv @@ q "
                "ORDER BY ts_rank(m.content_tsv, q) DESC LIMIT %s",
                [query, limit],
            )
        return cur.fetchall()

    def search_same(self, query: str, limit: int = 20, owner: object = None) -> list:
        """The hand-written query for our results: the same match, ranking (bm25 column weights on SQLite;
        ``ts_rank_cd`` with the tool-text weights and length normalisation on Postgres), order and
        snippets, without the library around it (no stem probe, no query parsing, no result objects).
        ``owner``: only that user's sessions, tested as ours tests them (an array of the owner's session
        ids, never a per-session index probe; see ``search.tsquery._owned_any``)."""
        words = query.split()
        owned, owned_params = "", []
        if owner is not None:
            sessions = "SELECT id FROM assistant_sessions WHERE owner_id = %s"
            if self.vendor == "sqlite":
                owned = f" AND m.session_id IN ({sessions})"
            else:
                owned = f" AND (m.session_id || '') = ANY(ARRAY({sessions}))"
            owned_params = [owner]
        if self.vendor == "sqlite":
            # The match our parser writes for these words (Porter stems spelled both ways).
            match = " AND ".join(f'("{w}" OR "{w}ness")' for w in words)
            cur = self.execute(
                "SELECT m.id, m.role, m.text_content, m.created_at, m.session_id, "
                "snippet(assistant_fts, -1, '**', '**', '…', 12) FROM assistant_messages m "
                f"JOIN assistant_fts ON assistant_fts.rowid = m.seq WHERE assistant_fts MATCH %s{owned} "
                "ORDER BY bm25(assistant_fts, 1.0, 0.25), m.seq LIMIT %s",
                [match, *owned_params, limit],
            )
        else:
            cur = self.execute(
                "SELECT hit.id, hit.role, hit.text_content, hit.created_at, hit.session_id, "
                "ts_headline('english', hit.text_content, q, 'StartSel=**, StopSel=**, MaxWords=24, MinWords=8, "
                'ShortWord=2, MaxFragments=2, FragmentDelimiter=" … "\') FROM (SELECT m.*, '
                "ts_rank_cd('{0.25, 0.2, 0.4, 1.0}'::float4[], m.content_tsv, q, 1) AS r "
                f"FROM assistant_messages m, plainto_tsquery('english', %s) q WHERE m.content_tsv @@ q{owned} "
                "ORDER BY r DESC, m.seq LIMIT %s) hit, plainto_tsquery('english', %s) q ORDER BY hit.r DESC, hit.seq",
                [query, *owned_params, limit, query],
            )
        return cur.fetchall()

    def register(self, session_id: str) -> None:
        """The target's ``assistant_sessions`` row, so the insert's triggers do the work they do for a real fork."""
        self.execute(
            "INSERT INTO assistant_sessions (id, name, parent_session_id, created_at, updated_at) "
            "VALUES (%s, %s, NULL, %s, %s)",
            [session_id, "raw fork", self.now(), self.now()],
        )

    def fork(self, source: str, target: str, leaf: str) -> int:
        """The path copied by one ``INSERT … SELECT`` into the rows a fork must leave: each copy's JSON
        carrying its new id (a copy still naming the old id inside ``content`` is a corrupt message),
        its tool text and its origin (what the fork mapping reads). Ids are the cheapest there is,
        ``'f' || id``, where ours mints random ones."""
        statement = (
            walks.path_cte(self.vendor)
            + "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content, tool_text,"
            " created_at, tokens, depth, path_tokens, origin_id) SELECT 'f' || m.id, %s, CASE WHEN m.parent_id IS"
            " NULL THEN NULL ELSE 'f' || m.parent_id END, m.role, '{\"id\":\"f' || substr(m.content, 8),"
            " m.text_content, m.tool_text, m.created_at, m.tokens, m.depth, m.path_tokens, m.id FROM path"
            " JOIN assistant_messages m ON m.session_id = path.sid AND m.seq = path.seq ORDER BY path.n DESC"
        )
        params = [source, leaf, walks.path_key_prefix(source), 10**9, source, target]
        if self.vendor == "postgresql":
            with self.conn.transaction():
                self.register(target)
                return self.conn.cursor().execute(statement, params).rowcount
        self.conn.execute("BEGIN")
        self.register(target)
        count = self.execute(statement, params).rowcount
        self.conn.execute("COMMIT")
        return count


def analyze(alias: str) -> None:
    """Refresh Postgres planner statistics after a bulk load, as autovacuum would shortly after."""
    if connections[alias].vendor == "postgresql":
        with connections[alias].cursor() as cursor:
            cursor.execute("ANALYZE assistant_messages")


def _sid(tag: str) -> str:
    return f"bench-{tag}-{uuid.uuid4().hex[:8]}"


def own_connection(alias: str, tag: str, **options: Any) -> str:
    """An alias for a connection of its own to ``alias``'s database (added once, at run time), with
    ``options`` added to its ``OPTIONS``."""
    name = f"{alias}-{tag}"
    if name not in connections.settings:
        config = dict(connections.settings[alias])
        config["OPTIONS"] = {**config.get("OPTIONS", {}), **options}
        connections.settings[name] = config
    return name


def prepared_connection(alias: str, tag: str, **options: Any) -> str:
    """:func:`own_connection` with the shipped prepared-statement options (docs/operations.md):
    psycopg's default threshold, as a plain psycopg connection (the langchain peer's) prepares."""
    return own_connection(alias, tag, **settings.PREPARED_STATEMENTS_OPTIONS, **options)


GENERIC = "force_generic_plan"


class Neutral:
    """Untimed work run before every timed append, the same whichever implementation comes next:
    an insert into a table of its own on a connection of its own, and unrelated Python work.

    Without it each implementation would run right after the one before it in the rotation, on the
    caches that one had warmed: our variants (same code, same tables) after each other are
    0.2-0.3 ms faster an append on Postgres than the one of them that follows a peer, enough to
    put ``ours + compact_after`` below plain ``ours``.  An agent's appends are separated by other
    work, so every implementation starts from someone else's."""

    def __init__(self, alias: str) -> None:
        self.raw = Raw(own_connection(alias, "neutral"))
        self.raw.execute("DROP TABLE IF EXISTS bench_neutral")
        self.raw.execute("CREATE TABLE bench_neutral (id integer PRIMARY KEY, body text NOT NULL)")
        self.doc = {"items": [{"key": i, "value": f"item {i}", "tags": ["a", "b"]} for i in range(400)]}
        self.count = 0

    def __call__(self) -> None:
        self.count += 1
        json.loads(json.dumps(self.doc))
        self.raw.execute("INSERT INTO bench_neutral (id, body) VALUES (%s, %s)", [self.count, "neutral"])


def append_one_by_one(alias: str, database: str, n: int, peers: list) -> list[Result]:
    """Workload 1: n auto-parented appends per implementation; per-append median at the start and at the end.

    Interleaved: append i goes to every implementation in turn, so a slow spell of a shared
    machine (a busy disk, a stolen core) hits them all alike, each after the same untimed
    :class:`Neutral` step.  The order is drawn afresh for each i (seeded), so each
    implementation follows every other equally often: rotated, one always came after the same
    neighbour, and on SQLite the one after the openai-agents peer lost 4-13 % to whatever that
    peer leaves in the process (CPU time too, not only waiting).  Each implementation has a
    connection of its own, as each peer has, so none runs on a connection the one before it has
    just used.  Besides wall time, each row reports the median process CPU time of an append
    (the client's share).
    """
    window = max(10, n // 20)  # the first and last 5 % of appends
    session = Session.create(using=alias).for_session(_sid("append"))
    compacting = (
        Session.create(using=own_connection(alias, "compact-after"))
        .for_session(_sid("append-ca"))
        .on_compaction(lambda messages, context=None: None)
        .compact_after(10**12)
    )
    raw, sid = Raw(own_connection(alias, "raw")), _sid("append-raw")
    # What most callers use: the manager, which also keeps the session's registry row (its
    # message count and its updated_at stamp, by the registry's clock).
    manager = SessionManager(using=own_connection(alias, "manager"))
    registered = manager.create("bench append").id
    impls = [
        ("ours", lambda i: session.append_message(message(i))),
        ("ours + compact_after", lambda i: compacting.append_message(message(i))),
        ("ours, SessionManager.append", lambda i: manager.append(registered, message(i))),
        ("raw SQL", lambda i: raw.append(sid, message(i))),
    ]
    if connections[alias].vendor == "postgresql":
        prepared = Session.create(using=prepared_connection(alias, "prepared")).for_session(_sid("append-p"))
        impls.insert(1, ("ours, prepared statements", lambda i: prepared.append_message(message(i))))
        # With server-bound parameters Postgres takes one statement per command: the manager's
        # stamp must travel inside the append function's call to stay one round trip.
        manager_p = SessionManager(using=prepared_connection(alias, "manager-prepared"))
        registered_p = manager_p.create("bench append, prepared").id
        impls.insert(4, ("ours, SessionManager.append, prepared", lambda i: manager_p.append(registered_p, message(i))))
    impls += [(peer.name, lambda i, peer=peer: peer.append(peer_item(i))) for peer in peers]
    neutral = Neutral(alias)
    wall: dict[str, list[float]] = {label: [] for label, _ in impls}
    cpu: dict[str, list[float]] = {label: [] for label, _ in impls}
    order = random.Random(1)
    for i in tqdm(range(n), desc=f"append ×{n} × {len(impls)}, interleaved [{database}]", leave=False):
        for label, append in order.sample(impls, len(impls)):
            neutral()
            before = time.process_time()
            wall[label].append(timed(lambda append=append, i=i: append(i))[0])
            cpu[label].append(time.process_time() - before)
    results = []
    for label, times in wall.items():
        start, end = per_op_medians(times, window)
        extras = {"start": f"{start * 1e6:.0f}µs", "end/start": f"{end / start:.2f}"}
        extras["cpu"] = f"{statistics.median(cpu[label]) * 1e6:.0f}µs"
        results.append(Result("1. append one by one (per append, end)", database, label, end, n, extras, binned(times)))
    return results


def append_all(alias: str, database: str, n: int, peers: list, rounds: int) -> list[Result]:
    """Workload 2: one call storing n messages; ours, raw SQL and each peer timed in turn within every
    round (:func:`interleaved_medians`), so a slow spell of a shared machine hits all of them alike."""
    manager = SessionManager(using=alias)
    batch = [message(i) for i in range(n)]
    raw = Raw(alias)
    items = [peer_item(i) for i in range(n)]
    fns: dict[str, Callable[[], Any]] = {
        "ours": lambda: manager.append_all(manager.create("bench").id, batch),
        "raw SQL": lambda: raw.append_all(_sid("all-raw"), batch),
    }
    for peer in peers:
        fns[peer.name] = lambda peer=peer: peer.append_all(items)
    return _interleaved_results("2. append_all", database, fns, rounds)


def _interleaved_results(label: str, database: str, fns: dict[str, Callable[[], Any]], rounds: int) -> list[Result]:
    """Results of :func:`interleaved_medians` over ``fns`` (``"ours"`` first), with CPU times and ratios."""
    medians = interleaved_medians(fns, rounds)
    ours_cpu = medians["ours"][1]
    return [
        Result(label, database, name, wall, rounds, cpu_note(cpu, None if name == "ours" else ours_cpu))
        for name, (wall, cpu) in medians.items()
    ]


QUICK_ROUNDS = 101
"""Rounds at least, for reads of a millisecond or less (the last 50, shallow depths): five single
calls of one are at the mercy of one slow spell, where 101 cost a fraction of a second (the
Postgres last-50 row: 2.06 and 2.30 ÷ the raw range scan in two runs of 5 rounds, 1.75 and 1.73
in two of 101)."""


def history_reads(alias: str, database: str, n: int, peers: list, rounds: int) -> list[Result]:
    """Workload 3: the full history of an n-message path, and the last 50 messages; every implementation
    timed in turn within each round (:func:`interleaved_medians`)."""
    sid = _sid("history")
    raw = Raw(alias)
    raw.append_all(sid, [message(i) for i in range(n)])
    analyze(alias)
    session = Session.create(using=alias).for_session(sid)
    assert len(session.get_history()) == n
    whole: dict[str, Callable[[], Any]] = {
        "ours": session.get_history,
        "raw SQL": lambda: raw.history(sid),
        "raw range scan": lambda: raw.history_range(sid),
    }
    last: dict[str, Callable[[], Any]] = {
        "ours": lambda: session.get_recent_history(max_content_bytes=0, min_recent_messages=50),
        "raw SQL": lambda: raw.recent(sid, 50),
        "raw range scan": lambda: raw.recent_range(sid, 50),
    }
    if connections[alias].vendor == "postgresql":
        # Both also on prepared-statement connections: a client's statement is otherwise planned
        # at every call, and our read's (the range and its latest-leaf lookup: three references
        # to the table) plans in 0.2 ms where the bare range scan's plans in 0.07 ms.
        prepared = Session.create(using=prepared_connection(alias, "prepared")).for_session(sid)
        raw_prepared = Raw(prepared_connection(alias, "raw-prepared"))
        last["ours, prepared statements"] = lambda: prepared.get_recent_history(
            max_content_bytes=0, min_recent_messages=50
        )
        last["raw range scan, prepared statements"] = lambda: raw_prepared.recent_range(sid, 50)
        # Whether that statement runs a plan built once (generic) or one planned at each call
        # (custom) is Postgres's choice, and it follows the table: a generic plan with the one
        # session of a workload-3-only run, custom plans (0.08 ms more) among a whole run's 17.
        # The floor a prepared range scan can reach is timed too, on a connection that always
        # keeps the generic plan, as our functions do.
        raw_generic = Raw(prepared_connection(alias, "raw-generic", options=f"-c plan_cache_mode={GENERIC}"))
        last[f"raw range scan, prepared, {GENERIC}"] = lambda: raw_generic.recent_range(sid, 50)
    # A window cut by a byte budget, as an agent fits its prompt: how many messages it holds
    # depends on their sizes, so the references read the number ours returned.
    held = len(session.get_recent_history(max_content_bytes=WINDOW_BYTES).messages)
    within: dict[str, Callable[[], Any]] = {
        "ours": lambda: session.get_recent_history(max_content_bytes=WINDOW_BYTES),
        "ours, first read of the window": lambda: _first_read(session),
        "raw SQL": lambda: raw.recent(sid, held),
        "raw range scan": lambda: raw.recent_range(sid, held),
    }
    if connections[alias].vendor == "postgresql":
        # What the window function buys, in the same rounds: the first read as a short range and
        # a read on, as a database without the function does it.
        within["ours, first read, reading on (before 0027)"] = lambda: _first_read(session, sized=False)
    for peer in peers:
        # Exactly the n items ours reads: workloads 1 and 2 leave 2n in the peer's session, which
        # would double its read in a full run.
        if len(peer.history()) != n:
            peer.reset()
            peer.append_all([peer_item(i) for i in range(n)])
        assert len(peer.history()) == n
        whole[peer.name] = peer.history
        if peer.recent(50) is not None:
            last[peer.name] = lambda peer=peer: peer.recent(50)
    recent = _interleaved_results("3b. last 50 (get_recent_history)", database, last, max(rounds, QUICK_ROUNDS))
    if connections[alias].vendor == "postgresql":
        for result in recent:
            if result.impl == "raw range scan, prepared statements":
                result.extra["plans"] = raw_prepared.plans()
    return [
        *_interleaved_results("3a. history of the whole path", database, whole, rounds),
        *recent,
        *_interleaved_results(
            f"3d. recent window within {WINDOW_BYTES:,} bytes ({held} msgs)",
            database,
            within,
            max(rounds, QUICK_ROUNDS),
        ),
    ]


WINDOW_BYTES = 20_000
"""Workload 3d's byte budget: about 180 of the bench's messages."""


def _first_read(session: Any, *, sized: bool = True) -> Any:
    """The budgeted window as a process reads it the first time: without the size it had last time
    (``range_reads.WINDOW_HINTS``).  On Postgres one call of ``agent_sessions_window``; on SQLite, or
    ``sized`` False (Postgres as without the window function), a short range and then a second."""
    range_reads.WINDOW_HINTS.clear()
    if sized:
        return session.get_recent_history(max_content_bytes=WINDOW_BYTES)
    read_calls = postgres.read_calls
    # The database taken to lack the function.
    postgres.read_calls = lambda connection: read_calls(connection)._replace(window=None)
    try:
        return session.get_recent_history(max_content_bytes=WINDOW_BYTES)
    finally:
        postgres.read_calls = read_calls


DEPTHS = (10, 100, 1_000, 2_500, 5_000, 10_000)


def history_by_depth(alias: str, database: str, n: int, peers: list, rounds: int) -> list[Result]:
    """Workload 3c (charted): history-read time against path depth, up to n, on one n-message session.

    Ours and raw read the path ending at the d-th message; peers read their newest d items
    (``get_items(limit=d)``), the same amount of data from a flat list.
    """
    sid = _sid("depth")
    raw = Raw(alias)
    raw.append_all(sid, [message(i) for i in range(n)])
    analyze(alias)
    session = Session.create(using=alias).for_session(sid)
    depths = [d for d in DEPTHS if d <= n] or [n]
    impls = [
        ("ours", lambda d: session.get_history(f"m{d - 1}")),
        ("raw SQL", lambda d: raw.history(sid, f"m{d - 1}")),
    ]
    for peer in peers:
        if peer.recent(1) is not None:
            if len(peer.history()) != n:
                peer.reset()
                peer.append_all([peer_item(i) for i in range(n)])
            impls.append((peer.name, lambda d, peer=peer: peer.recent(d)))
    by_depth = [
        interleaved_medians(
            {name: (lambda d=d, read=read: read(d)) for name, read in impls},
            max(rounds, QUICK_ROUNDS) if d <= 100 else rounds,
        )
        for d in depths
    ]
    points = {name: [(d, medians[name][0]) for d, medians in zip(depths, by_depth, strict=True)] for name, _ in impls}
    return [
        Result("3c. history by path depth (deepest)", database, name, series[-1][1], rounds, {}, series)
        for name, series in points.items()
    ]


def search(alias: str, database: str, rows: int, rounds: int) -> list[Result]:
    """Workload 4: an English two-word search over ``rows`` messages in 100 sessions."""
    rng = random.Random(7)
    raw = Raw(alias)
    per_session = max(1, rows // 100)
    for s in tqdm(range(100), desc=f"search data {rows} rows [{database}]", leave=False):
        batch = []
        for i in range(per_session):
            words = rng.sample(WORDS, 12)
            if i % 100 == 7:  # 1 % of messages match the query
                words[3:5] = ["deploying", "Friday"]
            batch.append(message(i, " ".join(words)))
        raw.append_all(_sid(f"search{s}"), batch)
    analyze(alias)
    query = "deploy friday"
    hits = orm.search(query, limit=20, using=alias)
    same = raw.search_same(query)
    assert [h.id for h in hits] == [row[0] for row in same], "the raw query must return our hits, in our order"
    medians = interleaved_medians(
        {
            "ours": lambda: orm.search(query, limit=20, using=alias),
            "raw SQL": lambda: raw.search_same(query),
            "raw SQL, ts_rank / bm25 defaults, no snippets": lambda: raw.search(query),
        },
        rounds,
    )
    label = "4. search (English, 2 words)"
    return [
        Result(label, database, name, wall, rounds, {"rows": rows, "hits": len(hits)} if name == "ours" else {})
        for name, (wall, _cpu) in medians.items()
    ]


FORK_ROUNDS = 11
"""Rounds at least for the fork: two forks of about 0.2–0.5 s a round, so five rounds can fall within
one slow spell of a noisy VM (SQLite fork ÷ raw seen at 2.11 in one run, 1.24 and 1.47 in two runs
straight after); eleven cost a few seconds more per database."""


def fork(alias: str, database: str, n: int, rounds: int) -> list[Result]:
    """Workload 5: fork of an n-message session (vs one raw INSERT … SELECT, and vs n appends)."""
    manager = SessionManager(using=alias)
    info = manager.create("fork source")
    raw = Raw(alias)
    raw.append_all(info.id, [message(i) for i in range(n)])
    analyze(alias)
    leaf = f"m{n - 1}"
    checked = _sid("fork-raw")
    raw.fork(info.id, checked, leaf)
    copies = raw.execute("SELECT id, content FROM assistant_messages WHERE session_id = %s", [checked]).fetchall()
    assert len(copies) == n
    assert all(json.loads(content)["id"] == mid for mid, content in copies)
    fns: dict[str, Callable[[], Any]] = {
        "ours": lambda: manager.fork(info.id, leaf, "fork"),
        "raw SQL": lambda: raw.fork(info.id, _sid("fork-raw"), leaf),
    }
    return _interleaved_results("5. fork", database, fns, max(rounds, FORK_ROUNDS))
