"""Postgres: an owner's cross-session search scans the word index once, whatever the number of sessions
owned (the API's ``GET /search`` for a non-staff caller)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from agent_sessions import conf
from agent_sessions.manager import SessionManager
from agent_sessions.models import SessionRecord
from agent_sessions.search import tsquery
from agent_sessions.search.args import as_query
from agent_sessions.search.plan import MESSAGES, Filters
from agent_sessions.storage import orm
from tests.conftest import msg
from tests.support.pg import plan_nodes

pytestmark = pytest.mark.postgres_only

OWNED = 40


def _owned_sessions(user, count: int, prefix: str) -> list[str]:
    manager = SessionManager()
    ids = []
    for i in range(count):
        info = manager.create(f"{prefix} {i}")
        SessionRecord.objects.filter(id=info.id).update(owner=user)
        texts = [f"note {j} about kyoto" + (" deploy on friday" if j % 3 == 0 else "") for j in range(6)]
        manager.append_all(info.id, [msg(f"{prefix}{i}-{j}", text=t) for j, t in enumerate(texts)])
        ids.append(info.id)
    return ids


def _word_index_reads(filters: Filters) -> tuple[int, int]:
    """(GIN scans, pages they read) when the search runs: EXPLAIN (ANALYZE, BUFFERS) of the compiled query."""
    sql, params = tsquery.compile_query(as_query("deploy friday"), MESSAGES, filters, conf.pg_text_search_config())
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # as in a table of more than a few pages
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    scans = pages = 0
    for node in plan_nodes(plan[0]["Plan"]):
        if node["Node Type"] == "Bitmap Index Scan" and "session_fts" in node.get("Index Name", ""):
            # A condition on session_id = ANY(array) is one GIN scan per element, each reading the
            # pending list; the plan shows it as the index condition.
            per_element = OWNED if "session_id" in node.get("Index Cond", "") else 1
            scans += per_element * node["Actual Loops"]
            pages += node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)
    return scans, pages


@pytest.mark.django_db
def test_an_owners_search_reads_the_word_index_once_whatever_the_sessions_owned():
    """``session_id = ANY(the owner's sessions)`` as a GIN index condition is one scan per session, each
    reading the index's pending list (rows inserted since its last cleanup): 20 sessions read 653 pages
    where the all-sessions search read 30.  The owner's search must cost what the all-sessions one does."""
    owner = get_user_model().objects.create_user("owner-scan")
    other = get_user_model().objects.create_user("owner-scan-other")
    mine = _owned_sessions(owner, OWNED, "mine")
    _owned_sessions(other, 5, "theirs")

    everyone_scans, everyone_pages = _word_index_reads(Filters(snippets=True))
    owner_scans, owner_pages = _word_index_reads(Filters(snippets=True, owner=owner.pk))
    assert everyone_scans >= 1
    assert owner_scans == everyone_scans  # one per (partition's) index, not one per session
    assert owner_pages <= everyone_pages + 2

    hits = orm.search("deploy friday", session_id=None, limit=500, using="default", owner=owner.pk)
    assert {h.session_id for h in hits} == set(mine)
    assert len(hits) == OWNED * 2
    everyone = orm.search("deploy friday", session_id=None, limit=500, using="default")
    assert [h.id for h in hits] == [h.id for h in everyone if h.session_id in set(mine)]
