"""The message tree of one session, built for the admin from one content-free query.

The admin must stay usable on sessions with tens of thousands of messages, so
the shape of the tree (ids, parents, roles, token figures) is loaded in a
single query without ``content``; the content of only the rows that are
actually rendered is fetched afterwards by ``seq`` (see :func:`fetch_contents`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..models import Compaction, Message
from ..overlays import applied_ranges
from ..storage import decode
from ..tokens import estimate_string_tokens
from ..types import StoredCompaction


@dataclass(frozen=True, slots=True)
class Node:
    """One message without its content."""

    seq: int
    id: str
    parent_id: str | None
    role: str
    tokens: int | None
    path_tokens: int | None
    depth: int | None


@dataclass
class Tree:
    """A session's messages as a tree: children in insertion order, subtree sizes and latest leaves."""

    nodes: dict[str, Node]
    children: dict[str | None, list[str]]
    size: dict[str, int] = field(default_factory=dict)
    latest_leaf_in: dict[str, str] = field(default_factory=dict)
    detached: int = 0
    cycles: list[str] = field(default_factory=list)
    """Ids of the messages on a parent cycle (a self-parent included), oldest first: stored by
    another writer, shown with a note naming them."""

    @property
    def roots(self) -> list[str]:
        return self.children.get(None, [])

    def kids(self, message_id: str) -> list[str]:
        return self.children.get(message_id, [])

    def latest_leaf(self) -> Node | None:
        """The most recently inserted childless message (as ``get_latest_leaf``)."""
        leaves = [n for n in self.nodes.values() if not self.children.get(n.id)]
        return max(leaves, key=lambda n: n.seq) if leaves else None

    def leaves(self) -> list[Node]:
        """Every childless message, newest first."""
        return sorted((n for n in self.nodes.values() if not self.children.get(n.id)), key=lambda n: -n.seq)

    def path_to(self, message_id: str) -> list[Node]:
        """Root→message chain (cycle-safe); ``[]`` for an unknown id."""
        chain: list[Node] = []
        seen: set[str] = set()
        current: str | None = message_id
        while current is not None and current in self.nodes and current not in seen:
            seen.add(current)
            node = self.nodes[current]
            chain.append(node)
            current = node.parent_id
        chain.reverse()
        return chain

    def chain_from(self, start: str, *, toward: str | None = None, until: str | None = None) -> list[Node]:
        """The chain from ``start`` down to a leaf (or to ``until``, inclusive).

        At each fork it follows the child leading to ``toward`` when that lies
        below, else the child holding the subtree's latest leaf.
        """
        on_way = {n.id for n in self.path_to(toward)} if toward else set()
        chain: list[Node] = []
        current: str | None = start
        seen: set[str] = set()
        while current is not None and current in self.nodes and current not in seen:
            seen.add(current)
            chain.append(self.nodes[current])
            if current == until:
                break
            kids = self.kids(current)
            preferred = [k for k in kids if k in on_way]
            if preferred:
                current = preferred[0]
            elif kids:
                target = self.latest_leaf_in.get(current)
                holding = [k for k in kids if self.latest_leaf_in.get(k) == target]
                current = (holding or kids)[-1]
            else:
                current = None
        return chain


def load_tree(session_id: str, *, using: str = "default") -> Tree:
    """Load the shape of a session's tree in ONE query (no content)."""
    rows = (
        Message.objects.using(using)
        .filter(session_id=session_id)
        .order_by("seq")
        .values_list("seq", "message_id", "parent_id", "role", "tokens", "path_tokens", "depth")
    )
    return build_tree(Node(*row) for row in rows)


def build_tree(rows: Iterable[Node]) -> Tree:
    """Index nodes by parent; a missing or foreign parent makes a root."""
    nodes = {n.id: n for n in rows}
    children: dict[str | None, list[str]] = {}
    own_parent = False
    for node in nodes.values():
        own_parent = own_parent or node.parent_id == node.id
        parent = node.parent_id if node.parent_id in nodes and node.parent_id != node.id else None
        children.setdefault(parent, []).append(node.id)
    tree = Tree(nodes=nodes, children=children)
    _index_subtrees(tree)
    if tree.detached or own_parent:  # only then can a parent cycle be stored
        tree.cycles = cycle_members(nodes)
    return tree


def cycle_members(nodes: dict[str, Node]) -> list[str]:
    """Ids of the nodes on a parent cycle, oldest first: each chain of parents is followed once,
    and a chain that comes back to itself marks the rows from the repeat on."""
    finished: set[str] = set()
    members: list[str] = []
    for start in nodes:
        trail: dict[str, int] = {}
        current: str | None = start
        while current is not None and current in nodes and current not in finished and current not in trail:
            trail[current] = len(trail)
            current = nodes[current].parent_id
        if current is not None and current in trail:
            members.extend(list(trail)[trail[current] :])
        finished.update(trail)
    return sorted(members, key=lambda i: nodes[i].seq)


def _index_subtrees(tree: Tree) -> None:
    """Subtree sizes and latest leaves, iteratively (paths can be 10,000+ deep)."""
    order: list[str] = []
    stack = list(reversed(tree.roots))
    while stack:
        current = stack.pop()
        order.append(current)
        stack.extend(reversed(tree.kids(current)))
    tree.detached = len(tree.nodes) - len(order)  # rows caught in a parent cycle
    for current in reversed(order):
        kids = tree.kids(current)
        tree.size[current] = 1 + sum(tree.size[k] for k in kids)
        if not kids:
            tree.latest_leaf_in[current] = current
        else:
            leaves = (tree.latest_leaf_in[k] for k in kids)
            tree.latest_leaf_in[current] = max(leaves, key=lambda i: tree.nodes[i].seq)


def load_compactions(session_id: str, *, using: str = "default") -> list[StoredCompaction]:
    """Every overlay of the session, oldest first (one query)."""
    rows = Compaction.objects.using(using).filter(session_id=session_id).order_by("seq")
    return [
        StoredCompaction(c.compaction_id, c.summary, c.from_message_id, c.to_message_id, c.created_at) for c in rows
    ]


@dataclass(frozen=True)
class PathItem:
    """One entry of a rendered path: a message, or a compacted range standing in for several."""

    nodes: tuple[Node, ...]
    overlay: StoredCompaction | None = None

    @property
    def weight(self) -> int:
        return len(self.nodes)


def path_items(path: Sequence[Node], compactions: Iterable[StoredCompaction]) -> list[PathItem]:
    """The path as ``get_history`` sees it: each visible overlay's range folded into one item."""
    items: list[PathItem] = []
    i = 0
    for start, end, overlay in applied_ranges([n.id for n in path], compactions):
        items.extend(PathItem((node,)) for node in path[i:start])
        items.append(PathItem(tuple(path[start : end + 1]), overlay))
        i = end + 1
    items.extend(PathItem((node,)) for node in path[i:])
    return items


def history_tokens(items: Iterable[PathItem]) -> int:
    """Estimated tokens of the path after overlays (summaries count instead of their ranges)."""
    total = 0
    for item in items:
        if item.overlay is None:
            total += item.nodes[0].tokens or 0
        else:
            total += 4 + estimate_string_tokens(item.overlay.summary)
    return total


def paginate(items: Sequence[PathItem], per_page: int, *, inline_limit: int) -> list[tuple[int, int]]:
    """Split items into pages of about ``per_page`` rendered rows; ``(start, stop)`` slices, root first.

    Pages are cut from the leaf backwards, so the newest page is a full one.
    A compacted range counts as its summary plus the originals rendered
    inline (ranges longer than ``inline_limit`` are lazy-loaded instead).
    """
    pages: list[tuple[int, int]] = []
    stop, weight = len(items), 0
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        cost = 1 + (item.weight if item.overlay and item.weight <= inline_limit else 0)
        if weight and weight + cost > per_page:
            pages.append((index + 1, stop))
            stop, weight = index + 1, 0
        weight += cost
    pages.append((0, stop))
    pages.reverse()
    return pages


def fetch_contents(seqs: Iterable[int], *, using: str = "default") -> dict[int, tuple[dict, object]]:
    """``seq → (message dict, created_at)`` for just these rows (one query per 900 rows)."""
    wanted = sorted(set(seqs))
    out: dict[int, tuple[dict, object]] = {}
    for start in range(0, len(wanted), 900):
        chunk = wanted[start : start + 900]
        rows = Message.objects.using(using).filter(seq__in=chunk)
        for seq, content, created_at, message_id, role in rows.values_list(
            "seq", "content", "created_at", "message_id", "role"
        ):
            out[seq] = (decode.message(content, row_id=message_id, role=role), created_at)
    return out
