"""Hyphenated, dotted and ``@`` terms match as the term, on both databases and at every entry point.

Word indexes cut ``db-replica-3`` into tokens (Postgres: ``db-replica``, ``db``, ``replica``,
``3``; FTS5: ``db``, ``replica``, ``3``); a hit must contain the term itself, not its parts
apart, in prose or with other punctuation.
"""

from __future__ import annotations

import re

import pytest

from agent_sessions.storage import orm
from tests.conftest import msg, tool_msg
from tests.support.search_docs import ids

pytestmark = pytest.mark.django_db

DOCS = {
    "h1": "failover to db-replica-3 done",
    "h2": "DB-Replica-3 is lagging again",
    "n1": "db replica 3 is fine",
    "n2": "3 servers: db-replica and db-primary",
    "n3": "db-replica-30 was retired",
    "n4": "db_replica_3 in the config",
    "n5": "db-replica 3 in prose",
    "v1": "upgrade to v1.2.3 tonight",
    "v2": "shipped v1.2.3.",
    "v3": "v1.2.30 is next",
    "v4": "v1 2 3 are steps",
    "v5": "release 1.2.3 without the v",
    "e1": "mail a@b.io now",
    "e2": "a b io spelled out",
    "e3": "xa@b.io is someone else",
}
EXPECTED = {
    "db-replica-3": {"h1", "h2", "t1"},
    "v1.2.3": {"v1", "v2"},
    "a@b.io": {"e1"},
    "(v1.2.3),": {"v1", "v2"},  # surrounding punctuation is not part of the term
    "db-replica-3 OR a@b.io": {"h1", "h2", "t1", "e1"},
    "db-replica-3 failover": {"h1"},
}


@pytest.fixture
def corpus(session):
    for i, (mid, text) in enumerate(DOCS.items()):
        session.append_message(msg(mid, role="user" if i % 2 == 0 else "assistant", text=text))
    session.append_message(tool_msg("t1", "ssh", "c1", {"host": "db-replica-3"}, {"ok": True}))
    return session


@pytest.mark.parametrize("term", list(EXPECTED))
def test_session_search_matches_the_term(corpus, term):
    assert ids(corpus.search(term, limit=50)) == EXPECTED[term]


@pytest.mark.parametrize("term", list(EXPECTED))
def test_cross_session_search_and_queryset_match_the_term(corpus, term):
    assert ids(orm.search(term, limit=50)) == EXPECTED[term]
    from agent_sessions.models import Message

    assert {m.message_id for m in Message.objects.search(term)} == EXPECTED[term]


def test_plain_words_still_match_their_parts(corpus):
    assert {"h1", "h2", "n1", "n2", "n3", "n4", "n5"} <= ids(corpus.search("replica", limit=50))


def test_api_search_matches_the_term(api):
    sid = api.new_session()
    for mid, text in DOCS.items():
        api.append(sid, mid, text)
    for term in ("db-replica-3", "v1.2.3", "a@b.io"):
        found = {r["id"] for r in api.get(f"/sessions/{sid}/search", q=term).json()["results"]}
        assert found == EXPECTED[term] - {"t1"}


def test_admin_changelist_matches_the_term(admin_client, corpus):
    for term in ("db-replica-3", "v1.2.3", "a@b.io"):
        html = admin_client.get("/admin/agent_sessions/message/", {"q": term}).content.decode()
        listed = set(re.findall(r'class="field-message_id"><a [^>]*>([^<]+)</a>', html))
        assert listed == EXPECTED[term], term
