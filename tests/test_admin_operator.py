"""The admin on the operator's 10,000-message session: navigation, context, search, bounds.

Every page is asserted to need at most ``MAX_QUERIES`` queries and to stay under ``MAX_PAGE_BYTES`` of HTML.
"""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from agent_sessions import SessionManager
from agent_sessions.admin.tree_page import FRAGMENT_MAX, LARGE_FRAGMENT, WINDOW_BEFORE
from agent_sessions.models import Compaction, ContextBlockRecord, Message
from tests.support.admin_data import (
    BIG_RANGE,
    NEEDLE_AT,
    OPERATOR_START,
    OPERATOR_STEP,
    UMBRELLA_EVERY,
    operator_session,
)

pytestmark = pytest.mark.django_db

BASE = "/admin/agent_sessions"
URL = f"{BASE}/sessionrecord/ops"
MAX_QUERIES = 10
MAX_PAGE_BYTES = 300_000


@pytest.fixture(scope="module")
def ops(django_db_setup, django_db_blocker):
    """The 10,000-message session, built once for the module (4-5 s a build on Postgres) and committed: the
    tests here only read it, each in its own rolled-back transaction; purged at the end like a deleted session."""
    with django_db_blocker.unblock():
        built = operator_session("ops")
    yield built
    with django_db_blocker.unblock():
        SessionManager().delete("ops")
        # Nothing of it may outlive the module: later modules count sessions, messages and blocks.
        assert not Message.objects.filter(session_id="ops").exists()
        assert not ContextBlockRecord.objects.filter(label__endswith="_ops").exists()


@pytest.fixture
def get(admin_client, django_assert_max_num_queries):
    """GET a page within the query budget; its HTML, checked against the page-weight bound (1.5 KB a row for
    the fragments an operator asks to load 500 rows at a time)."""

    def _get(path: str, params: dict | None = None, *, status: int = 200, max_bytes: int = MAX_PAGE_BYTES) -> str:
        with django_assert_max_num_queries(MAX_QUERIES):
            response = admin_client.get(path, params or {})
        assert response.status_code == status
        html = response.content.decode()
        assert len(response.content) < max_bytes, len(response.content)
        return html

    return _get


def rows(html: str) -> list[str]:
    return re.findall(r'<li class="as-msg [^"]*" id="msg-([^"]+)"', html)


def plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_tree_page_of_10k_is_bounded_and_lists_leaves(get, ops):
    html = get(f"{URL}/change/")
    assert '<dd data-stat="messages">10000</dd>' in html
    assert '<dd data-stat="leaves">13</dd>' in html
    assert '<dd data-stat="branch-points">11</dd>' in html
    assert f'<code data-stat="leaf">{ops["leaf"]}</code>' in html
    assert rows(html)[-1] == ops["leaf"]
    assert len(rows(html)) <= 120
    # The leaf list: id, role, time and an excerpt of each of the 13 leaves; the selected one marked.
    leaves = html.split('class="as-leaves"', 1)[1].split("</details>", 1)[0]
    assert leaves.count("data-leaf=") == 13
    assert re.search(rf'class="as-selected-leaf"><a [^>]*data-leaf="{ops["leaf"]}"', leaves)
    assert f"{ops['leaf']} notes on the rail timetable" in leaves
    assert "<time " in leaves
    assert "b1-5 notes on the rail timetable" in leaves  # a side branch's leaf excerpt
    page_count = int(re.search(r'name="page" min="1" max="(\d+)"', html).group(1))
    assert page_count > 40  # 9,620-deep path: dozens of pages, any of them one jump away


def test_jump_to_a_message_9000_deep_keeps_the_path(get, ops):
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "focus": "m9050"})
    assert 'class="as-msg as-role-user as-active as-focus" id="msg-m9050"' in html
    assert f'<code data-stat="leaf">{ops["leaf"]}</code>' in html
    assert "Context of user message m9050" in html
    depth = Message.objects.get(session_id="ops", message_id="m9050").depth
    assert depth == 9051


def test_jump_to_a_page_and_to_a_time(get, ops):
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "page": 3})
    assert re.search(r'name="page" min="1" max="\d+" value="3"', html)
    at = (OPERATOR_START + 7000 * OPERATOR_STEP).strftime("%Y-%m-%dT%H:%M:%S")
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "at": at})
    assert 'as-focus" id="msg-m7000"' in html
    # After the last message, or not a time: an honest note, not a wrong message.
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "at": "2030-01-01T00:00"})
    assert "No message of this path at or after" in html
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "at": "not a time"})
    assert "No message of this path at or after" in html


def test_a_message_in_the_4000_range_opens_the_range_at_it(get, ops):
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "focus": f"m{NEEDLE_AT}"})
    block = html.split('data-compaction-id="ops-big"', 1)[1].split('data-compaction-id="ops-small"', 1)[0]
    assert '<details class="as-originals" open>' in block
    lo = NEEDLE_AT - WINDOW_BEFORE
    window = block.split(f'data-continues="m{lo + 50}"', 1)[0]  # rows of the range, then the rest as a stub
    assert rows(window) == [f"m{i}" for i in range(lo, lo + 50)]
    assert 'as-focus" id="msg-m2345"' in block
    assert "zebracrossing" in block
    assert f"{lo - BIG_RANGE[0]} earlier messages" in plain(block)
    assert f"until=m{lo - 1}" in block
    after = BIG_RANGE[1] - (lo + 50) + 1
    assert f"{after} more messages" in plain(block)
    assert f"n={LARGE_FRAGMENT}" in block
    # The context panel says the model saw the summary instead, and links the compaction record.
    seq = Compaction.objects.get(compaction_id="ops-big").seq
    assert f'href="/admin/agent_sessions/compaction/{seq}/change/" data-context="compaction"' in html
    # The huge summary is cut in the page (about 490 KB stored).
    assert 'class="as-text as-summary as-clipped"' in block
    assert "point 8999" not in html


def test_old_style_links_to_a_compacted_message_land_on_it(get, ops):
    """Links made as ``?leaf=<id>#msg-<id>`` (message search, compaction records) open the range at the message."""
    html = get(f"{URL}/tree/", {"leaf": f"m{NEEDLE_AT}"})
    assert f'<code data-stat="leaf">{ops["leaf"]}</code>' in html
    assert 'as-focus" id="msg-m2345"' in html
    assert '<details class="as-originals" open>' in html


def test_search_in_the_session_has_true_totals_and_pages(get, admin_client, ops):
    for word in ("umbrella", "zebracrossing", "nosuchwordanywhere"):  # SQLite probes a word's stems once per process
        admin_client.get(f"{URL}/tree/", {"q": word})
    umbrellas = len(range(0, ops["main_len"], UMBRELLA_EVERY))
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "q": "umbrella"})
    assert f'<span data-stat="hits">{umbrellas} messages match</span>' in html
    pages = -(-umbrellas // 20)
    assert f"page 1 of {pages}" in html
    assert html.count('<li data-hit="') == 20
    last = get(f"{URL}/change/", {"leaf": ops["leaf"], "q": "umbrella", "hits": pages})
    assert last.count('<li data-hit="') == umbrellas - 20 * (pages - 1)
    # A unique hit inside the compacted range links to the page that opens the range at it.
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "q": "zebracrossing"})
    assert '<span data-stat="hits">1 message matches</span>' in html
    link = re.search(r'href="([^"]+)" class="as-hit-link">m2345<', html).group(1).replace("&amp;", "&")
    landed = get(link.split("#")[0])
    assert 'as-focus" id="msg-m2345"' in landed
    assert "<mark>zebracrossing</mark>" in html
    # Japanese (substring search) and a query that matches nothing.
    assert "messages match</span>" in get(f"{URL}/change/", {"q": "京都"})
    assert '<span data-stat="hits">0 messages match</span>' in get(f"{URL}/change/", {"q": "nosuchwordanywhere"})


def test_context_panel_of_an_answer(get, ops):
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "focus": "m4501"})
    panel = html.split('id="as-context"', 1)[1].split("</details>\n", 1)[0]
    assert "Context of assistant message m4501" in panel
    assert "You are a careful rail assistant." in panel
    assert "SOUL [readonly]" in panel
    assert "in effect when this message was written" in panel
    memory = panel.split('data-block="memory"', 1)[1].split("</tr>", 1)[0]
    assert "written after this message" in memory
    assert "User prefers the JR line." in memory
    assert "Show all (" in memory  # a 5 KB block is cut; its rest loads on demand
    assert 'data-context="parent">m4500<' in panel
    assert 'href="/admin/agent_sessions/sessionrecord/ops/change/" data-context="session"' in panel
    assert 'href="/admin/agent_sessions/sessionrecord/ops-origin/tree/" data-context="fork-parent"' in panel
    later = get(f"{URL}/change/", {"leaf": ops["leaf"], "focus": "m6001"})
    memory = later.split('data-block="memory"', 1)[1].split("</tr>", 1)[0]
    assert "written after this message" not in memory


def test_long_texts_are_cut_and_show_all_loads_the_rest(get, admin_client, ops):
    html = get(f"{URL}/change/", {"leaf": ops["leaf"], "focus": "m9107"})  # i % 7 == 0: a 4-8 KB text
    row = html.split('id="msg-m9107"', 1)[1].split("</li>", 1)[0]
    url = re.search(r'<details class="as-more" data-fragment-url="([^"]+)"', row).group(1).replace("&amp;", "&")
    head = re.search(r'<div class="as-text as-clipped">(.*?)<span class="as-ellipsis">', row, re.S).group(1)
    rest = re.search(r'<div class="as-rest">(.*?)</div>', get(url), re.S).group(1)
    full = json.loads(Message.objects.get(session_id="ops", message_id="m9107").content)["parts"][0]["text"]
    assert len(head) < 1_300 < len(full)
    assert unescape(head) + unescape(rest) == full
    # The ~490 KB summary loads in bounded steps, each offering the next.
    step, steps = get(f"{URL}/tree/text/", {"compaction": "ops-big"}), 1
    while "point 8999:" not in step:
        url = re.search(r'data-fragment-url="([^"]+)"', step).group(1).replace("&amp;", "&")
        step, steps = get(url), steps + 1
    assert 4 <= steps <= 6
    assert "Show more" not in step
    assert admin_client.get(f"{URL}/tree/text/", {"compaction": "nope"}).status_code == 404
    assert admin_client.get(f"{URL}/tree/text/", {"block": "memory_other"}).status_code == 404
    assert admin_client.get(f"{URL}/tree/text/", {"node": "m9107", "part": "9", "field": "text"}).status_code == 404
    assert admin_client.get(f"{URL}/tree/text/", {"node": "m9107", "part": "x", "field": "bogus"}).status_code == 404


def test_the_4000_range_loads_in_large_steps_and_names_branches(get, ops):
    first, last = BIG_RANGE
    html = get(
        f"{URL}/tree/fragment/",
        {"node": f"m{first}", "toward": ops["leaf"], "until": f"m{last}", "n": LARGE_FRAGMENT},
        max_bytes=LARGE_FRAGMENT * 1_500,
    )
    assert len(rows(html)) == LARGE_FRAGMENT
    # The fork at m500 (a 6-message branch) is a branch stub, the rest of the range a continuation.
    assert "branch of 6 messages" in plain(html)
    assert 'data-branch="b1-0"' in html
    assert f"{last - first + 1 - LARGE_FRAGMENT} more messages" in plain(html)
    assert f"n={LARGE_FRAGMENT}" in html.split('data-continues="', 1)[1]
    capped = get(
        f"{URL}/tree/fragment/",
        {"node": f"m{first}", "toward": ops["leaf"], "until": f"m{last}", "n": 50_000},
        max_bytes=FRAGMENT_MAX * 1_500,
    )
    assert len(rows(capped)) == FRAGMENT_MAX


def test_export_of_an_unknown_leaf_is_404(admin_client, ops):
    assert admin_client.get(f"{URL}/export/", {"leaf": "nope"}).status_code == 404
    response = admin_client.get(f"{URL}/export/", {"leaf": "b1-5"})
    assert response.status_code == 200
    assert response.json()["history"][-1]["id"] == "b1-5"


def test_context_block_label_is_one_line_and_fixed_once_saved(admin_client, db):
    html = admin_client.get(f"{BASE}/contextblockrecord/add/").content.decode()
    assert re.search(r'<input type="text" name="label"[^>]*class="vTextField"', html)
    assert '<textarea name="label"' not in html
    block = ContextBlockRecord.objects.create(label="memory_x", content="fact")
    html = admin_client.get(f"{BASE}/contextblockrecord/{block.pk}/change/").content.decode()
    assert 'name="label"' not in html
    assert "memory_x" in html
    response = admin_client.post(
        f"{BASE}/contextblockrecord/{block.pk}/change/",
        {"label": "renamed", "content": "fact 2", "updated_at_0": "2026-01-01", "updated_at_1": "00:00:00"},
    )
    assert response.status_code == 302
    saved = ContextBlockRecord.objects.filter(label__in=["memory_x", "renamed"])  # the module's session has blocks too
    assert list(saved.values_list("label", "content")) == [("memory_x", "fact 2")]
