"""The tree page on a 10,000-message session: a bounded number of queries and a bounded page."""

from __future__ import annotations

import re

import pytest

from agent_sessions.admin.tree_page import FRAGMENT_LIMIT, PER_PAGE
from tests.support.admin_data import big_session

pytestmark = pytest.mark.django_db

URL = "/admin/agent_sessions/sessionrecord/big/"
MAX_QUERIES = 10
"""Session + user (auth), the record, the tree's shape, the overlays, the visible rows' content, headroom."""


@pytest.fixture
def big():
    return big_session("big")


def rendered_rows(html: str) -> int:
    return len(re.findall(r'<li class="as-msg ', html))


def test_tree_page_on_10k_messages_is_bounded(admin_client, big, django_assert_max_num_queries):
    with django_assert_max_num_queries(MAX_QUERIES):  # the bound that matters; wall-clock belongs in bench/
        response = admin_client.get(f"{URL}change/")
    html = response.content.decode()
    assert response.status_code == 200
    assert '<dd data-stat="messages">10000</dd>' in html
    assert f'<code data-stat="leaf">{big["leaf"]}</code>' in html
    assert f'<dd data-stat="leaves">{1 + 10}</dd>' in html
    # One page of the path (the last, holding the latest leaf), not 10,000 rows.
    assert 0 < rendered_rows(html) <= PER_PAGE + 20
    assert f'id="msg-{big["leaf"]}"' in html
    assert 'id="msg-m0"' not in html
    assert "Short tail summary." in html
    assert "Long middle summary." not in html
    assert len(html) < 300_000  # page weight, as the operator tests bound it


def test_first_page_shows_root_and_lazy_long_compaction(admin_client, big, django_assert_max_num_queries):
    with django_assert_max_num_queries(MAX_QUERIES):
        html = admin_client.get(f"{URL}change/", {"page": 1, "leaf": big["leaf"]}).content.decode()
    assert 'id="msg-m0"' in html
    assert "Long middle summary." in html
    block = html.split('data-compaction-id="big-long"', 1)[1].split("</li>", 1)[0]
    half = big["main_len"] // 2
    assert f"replaces {half - 9} messages (m10 … m{half})" in re.sub("<[^>]+>", "", block)
    assert "data-fragment-url=" in block
    assert "node=m10" in block
    assert f"until=m{half}" in block
    # The long range's originals are not rendered in the page (they load on demand).
    assert 'id="msg-m11"' not in html
    assert 'class="as-badge as-fork-badge">' in block  # side branches hidden inside the range are announced


def test_fragment_of_the_long_range_is_bounded(admin_client, big, django_assert_max_num_queries):
    half = big["main_len"] // 2
    with django_assert_max_num_queries(MAX_QUERIES):
        response = admin_client.get(f"{URL}tree/fragment/", {"node": "m10", "toward": big["leaf"], "until": f"m{half}"})
    html = response.content.decode()
    assert rendered_rows(html) == FRAGMENT_LIMIT
    assert 'id="msg-m10"' in html
    assert f'id="msg-m{10 + FRAGMENT_LIMIT - 1}"' in html
    assert f"node=m{10 + FRAGMENT_LIMIT}" in html
    assert f"until=m{half}" in html
    assert html.count('data-active="true"') == FRAGMENT_LIMIT  # the originals are on the selected path


def test_selecting_a_side_branch_of_the_big_session(admin_client, big, django_assert_max_num_queries):
    fork = big["forks"][0]
    with django_assert_max_num_queries(MAX_QUERIES):
        html = admin_client.get(f"{URL}change/", {"leaf": "b0-49"}).content.decode()
    assert '<code data-stat="leaf">b0-49</code>' in html
    assert 'id="msg-b0-49"' in html
    # Path: m0 … fork, then the 50-row branch; the page holding the fork shows the main path as a stub.
    path_len = int(fork[1:]) + 1 + 50
    fork_page = next(
        i
        for i in range(1, 20)
        if f'id="msg-{fork}"' in admin_client.get(f"{URL}change/", {"leaf": "b0-49", "page": i}).content.decode()
    )
    assert f"{path_len} messages" in html
    html = admin_client.get(f"{URL}change/", {"leaf": "b0-49", "page": fork_page}).content.decode()
    stub = html.split(f'id="msg-{fork}"', 1)[1].split("</li>", 2)
    assert f'data-branch="m{int(fork[1:]) + 1}"' in stub[0]
    assert "branch of" in stub[0]
