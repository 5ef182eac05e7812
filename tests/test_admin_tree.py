"""agent_sessions.admin_tree: the content-free tree the admin renders from (no HTTP)."""

from __future__ import annotations

import pytest

from agent_sessions.admin.tree_layout import (
    Node,
    PathItem,
    build_tree,
    fetch_contents,
    history_tokens,
    load_tree,
    paginate,
    path_items,
)
from agent_sessions.types import StoredCompaction
from tests.support.admin_data import branched_session


def node(seq: int, mid: str, parent: str | None, tokens: int | None = 5) -> Node:
    return Node(seq=seq, id=mid, parent_id=parent, role="user", tokens=tokens, path_tokens=None, depth=None)


def overlay(oid: str, start: str, end: str, summary: str = "sum") -> StoredCompaction:
    return StoredCompaction(id=oid, summary=summary, from_message_id=start, to_message_id=end)


def test_tree_shape_sizes_and_latest_leaves():
    tree = build_tree(
        [node(1, "a", None), node(2, "b", "a"), node(3, "c", "a"), node(4, "d", "b"), node(5, "e", "missing-parent")]
    )
    assert tree.roots == ["a", "e"]  # a foreign/missing parent makes a root
    assert tree.kids("a") == ["b", "c"]
    assert tree.size == {"a": 4, "b": 2, "c": 1, "d": 1, "e": 1}
    assert tree.latest_leaf_in["a"] == "d"
    assert tree.latest_leaf().id == "e"
    assert [n.id for n in tree.leaves()] == ["e", "d", "c"]
    assert [n.id for n in tree.path_to("d")] == ["a", "b", "d"]
    assert tree.path_to("zzz") == []


def test_parent_cycles_are_detached_not_looped():
    tree = build_tree([node(1, "a", None), node(2, "x", "y"), node(3, "y", "x"), node(4, "s", "s")])
    assert tree.roots == ["a", "s"]  # a self-parent is treated as a root
    assert tree.detached == 2
    assert [n.id for n in tree.path_to("x")] == ["y", "x"]  # the walk stops at the repeat
    assert tree.cycles == ["x", "y", "s"]  # the rows on a cycle, oldest first, named on the page
    assert build_tree([node(1, "a", None), node(2, "b", "a")]).cycles == []


def test_chain_from_prefers_the_way_to_a_leaf_then_the_latest():
    tree = build_tree([node(1, "a", None), node(2, "b", "a"), node(3, "c", "a"), node(4, "d", "b"), node(5, "e", "c")])
    assert [n.id for n in tree.chain_from("a")] == ["a", "c", "e"]
    assert [n.id for n in tree.chain_from("a", toward="d")] == ["a", "b", "d"]
    assert [n.id for n in tree.chain_from("a", toward="d", until="b")] == ["a", "b"]


def test_path_items_fold_overlays_and_count_tokens():
    path = [node(i, f"m{i}", f"m{i - 1}" if i else None, tokens=10) for i in range(6)]
    items = path_items(path, [overlay("o1", "m1", "m3", "four words are here"), overlay("x", "m9", "m2")])
    assert [(i.overlay.id if i.overlay else None, [n.id for n in i.nodes]) for i in items] == [
        (None, ["m0"]),
        ("o1", ["m1", "m2", "m3"]),
        (None, ["m4"]),
        (None, ["m5"]),
    ]
    assert history_tokens(items) == 10 + (4 + 6) + 10 + 10  # summary: 4 + ceil(4 words * 1.3)


def test_paginate_cuts_from_the_leaf_and_weighs_inline_ranges():
    single = [PathItem((node(i, f"m{i}", None),)) for i in range(25)]
    assert paginate(single, 10, inline_limit=5) == [(0, 5), (5, 15), (15, 25)]
    rng = PathItem(tuple(node(i, f"r{i}", None) for i in range(4)), overlay("o", "r0", "r3"))
    # The range weighs 1 + 4: pages of at most 6 rendered rows, cut from the end.
    assert paginate([*single[:3], rng, *single[3:5]], 6, inline_limit=5) == [(0, 2), (2, 4), (4, 6)]
    big = PathItem(tuple(node(i, f"r{i}", None) for i in range(40)), overlay("o", "r0", "r39"))
    assert paginate([big, *single[:4]], 6, inline_limit=5) == [(0, 5)]  # a lazy range weighs one row
    assert paginate([], 10, inline_limit=5) == [(0, 0)]


@pytest.mark.django_db
def test_load_tree_and_fetch_contents_match_the_session(django_assert_num_queries):
    session = branched_session("tree-1")
    with django_assert_num_queries(1):
        tree = load_tree("tree-1")
    assert tree.latest_leaf().id == session.get_latest_leaf()["id"] == "a3"
    assert [n.id for n in tree.path_to("a3")] == ["u1", "a1", "u2", "a2", "u3", "a3"]
    assert tree.nodes["a3"].depth == 6
    assert tree.nodes["a3"].path_tokens == sum(tree.nodes[i].tokens for i in ["u1", "a1", "u2", "a2", "u3", "a3"])
    seqs = [tree.nodes[i].seq for i in ("a1", "a2b")]
    with django_assert_num_queries(1):
        contents = fetch_contents(seqs)
    assert contents[seqs[0]][0] == session.get_message("a1")
    assert contents[seqs[1]][0]["parts"][0]["text"] == "Alternative answer: sunny everywhere."
