"""The query language end to end on the test database: operators, ranking, snippets, paging, roles."""

from __future__ import annotations

import pytest

from agent_sessions.search import SNIPPET_START, SNIPPET_STOP, SearchQueryError
from agent_sessions.storage import orm
from tests.conftest import msg
from tests.support.search_docs import append_docs, ids, search

pytestmark = pytest.mark.django_db

DOCS = {
    "a": "We deploy the database on Friday",
    "b": "Friday is a holiday for the whole team",
    "c": "The deployment pipeline runs nightly",
    "d": "Release notes: deploy on Monday, never on Friday night",
    "e": "Coffee machine is broken again",
}


@pytest.fixture
def docs(session):
    return append_docs(session, DOCS)


def test_words_all_required_with_stemming(docs):
    assert ids(search(docs, "deploying friday")) == {"a", "d"}
    assert ids(search(docs, "deployments")) == {"a", "c", "d"}


def test_or(docs):
    assert ids(search(docs, "coffee OR holiday")) == {"b", "e"}
    assert ids(search(docs, "friday coffee OR holiday")) == {"b"}  # friday AND (coffee OR holiday)


def test_lowercase_or_is_a_word(docs):
    assert search(docs, "coffee or holiday") == []


def test_phrase(docs):
    assert ids(search(docs, '"deploy the database"')) == {"a"}
    assert ids(search(docs, '"database deploy"')) == set()
    assert ids(search(docs, '"friday night"')) == {"d"}


def test_exclusion(docs):
    assert ids(search(docs, "friday -holiday")) == {"a", "d"}
    assert ids(search(docs, 'friday -"never on friday"')) == {"a", "b"}
    assert ids(search(docs, "deploy -monday -database")) == {"c"}


def test_only_exclusions_return_nothing(docs):
    assert search(docs, "-friday") == []


def test_operators_in_other_places_are_literal(docs):
    # "AND"/"NOT" are plain words (stop words on Postgres): never operators.
    assert ids(search(docs, "friday NOT holiday")) <= {"b"}
    assert ids(search(docs, "coffee AND holiday")) == set()
    assert ids(search(docs, "deploy* friday")) == {"a", "d"}
    assert ids(search(docs, "(friday) [holiday]")) == {"b"}
    assert ids(search(docs, "NEAR(friday holiday)")) == set()


def test_ranking_order(session):
    session.append_message(msg("once", text="a long message that mentions kubernetes only once among many other words"))
    session.append_message(msg("thrice", text="kubernetes kubernetes kubernetes"))
    session.append_message(msg("twice", text="kubernetes cluster and kubernetes nodes"))
    assert [h.id for h in search(session, "kubernetes")] == ["thrice", "twice", "once"]


def test_snippet_highlights_matches(docs):
    (hit,) = search(docs, "holiday")
    assert f"{SNIPPET_START}holiday{SNIPPET_STOP}" in hit.snippet
    (hit,) = search(docs, "pipelines")
    assert f"{SNIPPET_START}pipeline{SNIPPET_STOP}" in hit.snippet


def test_snippet_of_long_text_is_an_excerpt(session):
    text = " ".join(["filler"] * 300) + " the needle is here " + " ".join(["filler"] * 300)
    session.append_message(msg("long", text=text))
    (hit,) = search(session, "needle")
    assert f"{SNIPPET_START}needle{SNIPPET_STOP}" in hit.snippet
    assert len(hit.snippet) < 400


def test_pagination(session):
    for i in range(7):
        session.append_message(msg(f"m{i}", text="needle " * (i + 1)))
    everything = [h.id for h in search(session, "needle", limit=100)]
    assert len(everything) == 7
    pages = [[h.id for h in search(session, "needle", limit=3, offset=o)] for o in (0, 3, 6, 9)]
    assert pages[0] + pages[1] + pages[2] == everything
    assert [len(p) for p in pages] == [3, 3, 1, 0]


def test_role_filter(docs):
    assert ids(search(docs, "friday", role="user")) == {"a"}
    assert ids(search(docs, "friday", role="assistant")) == {"b", "d"}
    assert ids(search(docs, "friday", role=["user", "assistant"])) == {"a", "b", "d"}
    assert search(docs, "friday", role="system") == []
    with pytest.raises(SearchQueryError):
        search(docs, "friday", role=3)


def test_cross_session_returns_session_ids(db):
    from agent_sessions import Session

    one = Session.create().for_session("search-x-1")
    two = Session.create().for_session("search-x-2")
    one.append_message(msg("m1", text="shared quasar topic"))
    two.append_message(msg("m2", text="another quasar topic"))
    hits = orm.search("quasar")
    assert {(h.session_id, h.id) for h in hits} == {("search-x-1", "m1"), ("search-x-2", "m2")}
    assert ids(orm.search("quasar", role="user", limit=1, offset=1)) <= {"m1", "m2"}


def test_session_search_uses_the_language(docs):
    assert ids(docs.search("friday -holiday")) == {"a", "d"}
    assert all(h.snippet for h in docs.search("friday"))


def test_updated_text_is_reindexed(docs):
    docs.update_message(msg("e", text="The coffee machine is fixed on Friday"))
    assert "e" in ids(search(docs, "friday coffee"))
    assert "e" not in ids(search(docs, "broken"))


def test_stop_words_alone_never_turn_an_exclusion_into_match_all(docs, is_postgres):
    # Postgres drops English stop words; SQLite's FTS5 indexes every word.
    assert ids(search(docs, "the -friday")) == (set() if is_postgres else {"c"})
    assert ids(search(docs, "is coffee -friday")) == {"e"}
