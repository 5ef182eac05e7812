"""Knowledge entries (cf_agents_search_entries) use the same language, ranking, CJK and paging."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_sessions import DjangoSearchProvider
from agent_sessions.search import SNIPPET_START
from agent_sessions.search.args import query_terms
from agent_sessions.storage import backends

pytestmark = pytest.mark.django_db

ENTRIES = {
    "deploy-runbook": "How to deploy the database on Friday evenings",
    "holiday": "Friday is a company holiday in December",
    "pipeline": "The deployment pipeline runs nightly",
    "jp-deploy": "金曜日にデプロイします",
    "jp-meeting": "明日の会議は十時から",
}


@pytest.fixture
def provider(db):
    p = DjangoSearchProvider()
    p.init("knowledge")
    for key, content in ENTRIES.items():
        p.set(key, content)
    other = DjangoSearchProvider()
    other.init("elsewhere")
    other.set("deploy-elsewhere", "deploy friday elsewhere")
    return p


def keys(rows) -> set[str]:
    return {r["key"] if isinstance(r, dict) else r[0] for r in rows}


def entries(query, *, limit=20, **kw):
    with connection.cursor() as cursor:
        return backends.for_alias("default").search_entries(cursor, "knowledge", query_terms(query), limit, **kw)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("friday", {"deploy-runbook", "holiday"}),
        ("deploying", {"deploy-runbook", "pipeline"}),
        ("friday -holiday", {"deploy-runbook"}),
        ("holiday OR nightly", {"holiday", "pipeline"}),
        ('"deploy the database"', {"deploy-runbook"}),
        ("会議", {"jp-meeting"}),
        ("デプロイ", {"jp-deploy"}),
        ("金曜日にデプ", {"jp-deploy"}),
        ("デプロイ OR friday", {"jp-deploy", "deploy-runbook", "holiday"}),
        ("-friday", set()),
        ("", set()),
    ],
)
def test_provider_search(provider, query, expected):
    assert keys(provider.search(query)) == expected


def test_label_isolation(provider):
    assert "deploy-elsewhere" not in keys(provider.search("deploy friday"))


def test_rows_keep_their_shape_and_page(provider):
    rows = entries("friday OR deploying OR nightly", limit=10)
    assert all(len(r) == 2 for r in rows)
    assert len(rows) == 3
    pages = [entries("friday OR deploying OR nightly", limit=2, offset=o) for o in (0, 2)]
    assert pages[0] + pages[1] == rows


def test_snippets_on_request(provider):
    rows = entries("holiday", snippets=True)
    assert len(rows) == 1
    assert len(rows[0]) == 3
    assert f"{SNIPPET_START}holiday" in rows[0][2]
    (row,) = entries("会議", snippets=True)
    assert f"{SNIPPET_START}会議" in row[2]


def test_plain_word_lists_still_work(provider):
    with connection.cursor() as cursor:
        rows = backends.for_alias("default").search_entries(cursor, "knowledge", ["friday", "holiday"], 5)
    assert keys(rows) == {"holiday"}


def test_ranking(db):
    p = DjangoSearchProvider()
    p.init("ranked")
    p.set("once", "a long entry that names kubernetes once among a great many other words here")
    p.set("thrice", "kubernetes kubernetes kubernetes")
    p.set("twice", "kubernetes cluster, kubernetes nodes")
    assert [r["key"] for r in p.search("kubernetes")] == ["thrice", "twice", "once"]
