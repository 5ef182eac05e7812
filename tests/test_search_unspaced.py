"""Scripts written without spaces besides CJK (Thai, Lao, Khmer, Burmese, Tibetan, Javanese, …) match by substring.

The word index sees the whole run between spaces as one token, so a word inside such a sentence
must go to the substring index: through the word index "ข้าวผัด" would not find "ฉันชอบกินข้าวผัดทุกวัน".
"""

from __future__ import annotations

import pytest

from agent_sessions import DjangoSearchProvider, SessionManager
from agent_sessions.search import SNIPPET_START, SNIPPET_STOP
from agent_sessions.search.query import is_cjk
from tests.conftest import msg
from tests.support.search_docs import append_docs, ids, search

pytestmark = pytest.mark.django_db

DOCS = {
    "thai": "ฉันชอบกินข้าวผัดทุกวัน",  # I like to eat fried rice every day
    "thai-rain": "พรุ่งนี้ฝนจะตกหนักมาก",  # tomorrow it will rain heavily
    "lao": "ຂ້ອຍມັກກິນເຂົ້າໜຽວຫຼາຍ",  # I like sticky rice a lot
    "khmer": "ខ្ញុំចូលចិត្តញ៉ាំបាយជាមួយត្រី",  # I like to eat rice with fish
    "burmese": "ကျွန်တော်ထမင်းစားချင်တယ်",  # I want to eat rice
    "tibetan": "ང་ལྷ་སར་འགྲོ་གི་ཡིན།",  # I am going to Lhasa
    "javanese": "ꦲꦏꦸꦱꦼꦤꦼꦁꦩꦁꦤ꧀ꦢꦶꦥꦱꦂ",  # I like going to the market
    "mixed": "สูตรข้าวผัด recipe for fried rice",
    "english": "We eat fried rice on Friday",
}


@pytest.fixture
def docs(session):
    return append_docs(session, DOCS)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ข้าวผัด", {"thai", "mixed"}),  # a word inside a Thai sentence
        ("ทุกวัน", {"thai"}),
        ("ฝนจะตก", {"thai-rain"}),
        ("ฝน", {"thai-rain"}),  # two characters: the bounded scan
        ("เข้าห้อง", set()),
        ("ເຂົ້າໜຽວ", {"lao"}),
        ("ចូលចិត្ត", {"khmer"}),
        ("ត្រី", {"khmer"}),
        ("ထမင်း", {"burmese"}),
        ("ལྷ་ས", {"tibetan"}),
        ("འགྲོ", {"tibetan"}),
        ("ꦱꦼꦤꦼꦁ", {"javanese"}),
    ],
)
def test_words_inside_unspaced_sentences_are_found(docs, query, expected):
    assert ids(search(docs, query)) == expected


def test_unspaced_terms_combine_with_words(docs):
    assert ids(search(docs, "ข้าวผัด recipe")) == {"mixed"}
    assert ids(search(docs, "ข้าวผัด -recipe")) == {"thai"}
    assert ids(search(docs, "fried -ข้าวผัด")) == {"english"}
    assert ids(search(docs, "ထမင်း OR ត្រី")) == {"burmese", "khmer"}
    assert ids(search(docs, '"กินข้าวผัด"')) == {"thai"}


def test_unspaced_snippets_are_highlighted(docs):
    (hit,) = search(docs, "ทุกวัน")
    assert f"{SNIPPET_START}ทุกวัน{SNIPPET_STOP}" in hit.snippet


def test_session_and_cross_session_search(docs):
    assert [r.id for r in docs.search("ข้าวผัด")]
    assert {r.id for r in docs.search("ข้าวผัด")} == {"thai", "mixed"}
    manager = SessionManager()
    other = manager.create("other").id
    manager.append(other, msg("elsewhere", text="เมื่อวานฉันกินข้าวผัดกุ้ง"))
    found = {(r.session_id, r.id) for r in manager.search("ข้าวผัด")}
    assert (other, "elsewhere") in found
    assert (docs.session_id, "thai") in found


def test_search_entries_match_by_substring_too():
    provider = DjangoSearchProvider(label="kb-thai")
    provider.set("food", "ร้านนี้ขายข้าวผัดอร่อยที่สุด")
    provider.set("weather", "วันนี้อากาศร้อนมาก")
    assert [r["key"] for r in provider.search("ข้าวผัด")] == ["food"]
    assert [r["key"] for r in provider.search("อากาศ")] == ["weather"]


@pytest.mark.parametrize(
    ("text", "unspaced"),
    [
        ("ข้าว", True),
        ("ເຂົ້າ", True),
        ("បាយ", True),
        ("ထမင်း", True),
        ("བོད", True),
        ("ꦱꦼꦤꦼꦁ", True),
        ("ᨅᨔ", True),
        ("ꆈꌠ", True),
        ("ᮞᮥᮔ᮪ᮓ", False),
        ("ሰላም", False),
        ("привет", False),
        ("नमस्ते", False),
    ],
)
def test_which_scripts_are_unspaced(text, unspaced):
    assert is_cjk(text) is unspaced
