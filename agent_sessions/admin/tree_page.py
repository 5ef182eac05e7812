"""Template context of the message-tree page and of its lazily loaded fragments.

Query budget of a page: the tree's shape (one query), the overlays (one) and
the content of the rendered rows (one per 900 rows), whatever the session's
size. Only one page of the selected path is rendered; other branches show as
stubs whose content is fetched on demand (:func:`fragment_context`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

from ..admin_tree import Node, PathItem, Tree, fetch_contents, history_tokens, load_compactions, load_tree, paginate
from ..admin_tree import path_items as fold_overlays
from ..types import StoredCompaction
from .parts import PartView, part_views

PER_PAGE = 100
"""Rendered rows per page of the selected path."""
INLINE_LIMIT = 50
"""Compacted ranges up to this long render their originals inline (collapsed); longer ones load on demand."""
FRAGMENT_LIMIT = 50
"""Rows per lazily loaded fragment."""
MAX_LEAVES = 50
"""Leaves listed in the branch picker (newest first)."""


@dataclass(frozen=True)
class Urls:
    """Where the page links to: itself (with a query string) and the fragment view."""

    page: str
    fragment: str

    def select(self, message_id: str) -> str:
        return f"{self.page}?{urlencode({'leaf': message_id})}#msg-{quote(message_id, safe='')}"

    def page_link(self, leaf: str, page: int) -> str:
        return f"{self.page}?{urlencode({'leaf': leaf, 'page': page})}"

    def chain(self, start: str, *, toward: str = "", until: str = "") -> str:
        query = {k: v for k, v in {"node": start, "toward": toward, "until": until}.items() if v}
        return f"{self.fragment}?{urlencode(query)}"


@dataclass(frozen=True)
class Stub:
    """A branch not rendered yet: its first message's shape and where to load or select it."""

    node: Node
    size: int
    leaf_id: str
    load_url: str
    select_url: str


@dataclass
class Row:
    """A rendered message."""

    node: Node
    parts: list[PartView]
    created_at: object
    active: bool = False
    selected: bool = False
    focus: bool = False
    child_count: int = 0
    stubs: list[Stub] = field(default_factory=list)
    select_url: str = ""


@dataclass
class Entry:
    """One item of the rendered path: a message row, or an overlay with its originals."""

    row: Row | None = None
    overlay: StoredCompaction | None = None
    originals: list[Row] = field(default_factory=list)
    range_size: int = 0
    range_tokens: int = 0
    branch_count: int = 0
    lazy_url: str = ""


def _stubs(tree: Tree, parent_id: str | None, skip: str | None, urls: Urls) -> list[Stub]:
    """Children of ``parent_id`` (roots for None) other than ``skip``, the one rendered below it."""
    return [
        Stub(
            node=tree.nodes[kid],
            size=tree.size.get(kid, 1),
            leaf_id=tree.latest_leaf_in.get(kid, kid),
            load_url=urls.chain(kid),
            select_url=urls.select(tree.latest_leaf_in.get(kid, kid)),
        )
        for kid in tree.children.get(parent_id, [])
        if kid != skip
    ]


def _row(tree: Tree, node: Node, contents: dict, urls: Urls, *, next_id: str | None, **flags: bool) -> Row:
    message, created_at = contents.get(node.seq, ({}, None))
    return Row(
        node=node,
        parts=part_views(message),
        created_at=created_at,
        child_count=len(tree.kids(node.id)),
        stubs=_stubs(tree, node.id, next_id, urls),
        select_url=urls.select(tree.latest_leaf_in.get(node.id, node.id)),
        **flags,
    )


def tree_context(session_id: str, urls: Urls, *, focus: str | None = None, page: int | None = None,
                 using: str = "default") -> dict:
    """Everything the tree template needs for one page of the path to the selected leaf."""
    tree = load_tree(session_id, using=using)
    context: dict = {"tree": tree, "message_count": len(tree.nodes), "urls": urls}
    if not tree.nodes:
        return context
    unknown = bool(focus) and focus not in tree.nodes
    if not focus or unknown:
        focus = tree.latest_leaf().id
    leaf_id = tree.latest_leaf_in.get(focus, focus)
    path = tree.path_to(leaf_id)
    next_on_path = {a.id: b.id for a, b in zip(path, path[1:], strict=False)}
    compactions = load_compactions(session_id, using=using)
    items = fold_overlays(path, compactions)
    pages = paginate(items, PER_PAGE, inline_limit=INLINE_LIMIT)
    index = _page_index(pages, items, focus, page)
    start, stop = pages[index]
    shown = items[start:stop]
    seqs = [n.seq for item in shown for n in _rendered_nodes(item)]
    contents = fetch_contents(seqs, using=using)

    def row(node: Node) -> Row:
        return _row(tree, node, contents, urls, next_id=next_on_path.get(node.id), active=True,
                    selected=node.id == leaf_id, focus=node.id == focus)

    entries = [_entry(tree, item, row, urls, leaf_id) for item in shown]
    root = path[0].id
    leaves = tree.leaves()
    context.update(
        unknown_leaf=unknown,
        leaf=tree.nodes[leaf_id],
        focus_id=focus,
        path_length=len(path),
        path_tokens=path[-1].path_tokens,
        history_length=len(items),
        history_tokens=history_tokens(items),
        entries=entries,
        compaction_count=len(compactions),
        visible_compactions=sum(1 for i in items if i.overlay),
        page_number=index + 1,
        page_count=len(pages),
        page_links=_page_links(urls, leaf_id, index, len(pages)),
        first_position=sum(i.weight for i in items[:start]) + 1,
        other_roots=_stubs(tree, None, root, urls),
        leaves=[(n, n.id == leaf_id, urls.select(n.id)) for n in leaves[:MAX_LEAVES]],
        leaf_count=len(leaves),
        branch_points=sum(1 for parent, kids in tree.children.items() if parent is not None and len(kids) > 1),
        detached=tree.detached,
    )
    return context


def _rendered_nodes(item: PathItem) -> tuple[Node, ...]:
    if item.overlay is None:
        return item.nodes
    return item.nodes if item.weight <= INLINE_LIMIT else ()


def _entry(tree: Tree, item: PathItem, row, urls: Urls, leaf_id: str) -> Entry:
    if item.overlay is None:
        return Entry(row=row(item.nodes[0]))
    entry = Entry(
        overlay=item.overlay,
        range_size=item.weight,
        range_tokens=sum(n.tokens or 0 for n in item.nodes),
        branch_count=sum(len(tree.kids(n.id)) for n in item.nodes) - (item.weight - 1) - (item.nodes[-1].id != leaf_id),
    )
    if item.weight <= INLINE_LIMIT:
        entry.originals = [row(n) for n in item.nodes]
    else:
        entry.lazy_url = urls.chain(item.nodes[0].id, toward=leaf_id, until=item.nodes[-1].id)
    return entry


def _page_index(pages: list[tuple[int, int]], items: list[PathItem], focus: str, page: int | None) -> int:
    """The requested page, else the one holding the focused message."""
    if page is not None:
        return min(max(page, 1), len(pages)) - 1
    for index, (start, stop) in enumerate(pages):
        if any(n.id == focus for item in items[start:stop] for n in item.nodes):
            return index
    return len(pages) - 1


def _page_links(urls: Urls, leaf: str, index: int, count: int) -> list[tuple[int, str, bool]]:
    """``(number, url, current)`` for the first, last and nearby pages."""
    wanted = sorted({0, count - 1, *range(max(0, index - 2), min(count, index + 3))})
    return [(i + 1, urls.page_link(leaf, i + 1), i == index) for i in wanted]


def fragment_context(session_id: str, urls: Urls, *, start: str, toward: str = "", until: str = "",
                     using: str = "default") -> dict:
    """A chain of up to :data:`FRAGMENT_LIMIT` rows from ``start`` (a branch or a compacted range).

    Side branches inside it show as stubs; a longer chain ends in a stub that
    loads the rest.
    """
    tree = load_tree(session_id, using=using)
    if start not in tree.nodes:
        return {"rows": [], "missing": True}
    chain = tree.chain_from(start, toward=toward or None, until=until or None)
    shown, rest = chain[:FRAGMENT_LIMIT], chain[FRAGMENT_LIMIT:]
    contents = fetch_contents([n.seq for n in shown], using=using)
    on_path = {n.id for n in tree.path_to(toward)} if toward else set()
    rows = []
    for i, node in enumerate(shown):
        nxt = chain[i + 1].id if i + 1 < len(chain) else None
        rows.append(_row(tree, node, contents, urls, next_id=nxt, active=node.id in on_path))
    more = None
    if rest:
        more = Stub(
            node=rest[0],
            size=len(rest),
            leaf_id=tree.latest_leaf_in.get(rest[0].id, rest[0].id),
            load_url=urls.chain(rest[0].id, toward=toward, until=until),
            select_url=urls.select(tree.latest_leaf_in.get(rest[0].id, rest[0].id)),
        )
    return {"rows": rows, "more": more, "urls": urls}
