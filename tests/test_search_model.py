"""Random queries agree with a reference model of the language (hypothesis), on either database."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_sessions import Session
from agent_sessions.storage import orm
from tests.conftest import msg

pytestmark = pytest.mark.django_db

LATIN = ["apple", "mango", "lemon", "grape"]  # distinct stems, no stop words
CJK = ["会議", "移行", "デプロイ", "金曜日"]  # 2–4 characters: scan and trigram paths


def _corpus() -> dict[str, tuple[list[str], str]]:
    rng = random.Random(11)
    docs = {}
    for i in range(24):
        words = rng.sample(LATIN, rng.randint(0, 3))
        japanese = "の".join(rng.sample(CJK, rng.randint(0, 2)))
        docs[f"d{i}"] = (words, (" ".join(words) + " " + japanese + "です").strip())
    return docs


DOCS = _corpus()


def matches(term: str, doc: tuple[list[str], str]) -> bool:
    words, text = doc
    if term in CJK:
        return term in text
    if " " in term:
        return any(list(pair) == term.split() for pair in itertools.pairwise(words))
    return term in words


def render(term: str) -> str:
    return f'"{term}"' if " " in term else term


terms = st.one_of(
    st.sampled_from(LATIN + CJK),
    st.tuples(st.sampled_from(LATIN), st.sampled_from(LATIN)).map(" ".join),
)
queries = st.tuples(
    st.lists(st.lists(terms, min_size=1, max_size=3), min_size=1, max_size=3),
    st.lists(terms, max_size=2),
)


@pytest.fixture
def corpus(db):
    session = Session.create().for_session("model")
    for mid, (_, text) in DOCS.items():
        session.append_message(msg(mid, text=text))
    return session


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries)
def test_results_equal_the_reference_model(corpus, query):
    groups, excluded = query
    text = " ".join(" OR ".join(render(t) for t in g) for g in groups)
    text += "".join(f" -{render(t)}" for t in excluded)
    expected = {
        mid
        for mid, doc in DOCS.items()
        if all(any(matches(t, doc) for t in g) for g in groups) and not any(matches(t, doc) for t in excluded)
    }
    found = {h.id for h in orm.search(text, session_id="model", limit=100)}
    assert found == expected, text
