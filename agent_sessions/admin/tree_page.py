"""Template context of the message-tree page and of its lazily loaded fragments.

Query budget of a page: the tree's shape (one query), the overlays (one),
the content of the rendered rows and listed leaves (one per 900 rows) and the
context panel (one), whatever the session's size; a search adds its count and
its page of hits. Only one page of the selected path is rendered; other
branches show as stubs whose content is fetched on demand (:func:`fragment_context`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import quote, urlencode

from ..exceptions import AgentSessionsError
from ..models import Compaction
from ..storage.orm import search
from ..types import StoredCompaction, text_content
from .context_panel import BlockView, ContextPanel, load_panel
from .model_calls_page import recorded_replies
from .navigation import resolve
from .parts import Clip, PartView, clip, part_views
from .search import Matches, matches
from .tree_layout import Node, PathItem, Tree, fetch_contents, history_tokens, load_tree, paginate
from .tree_layout import path_items as fold_overlays

PER_PAGE = 100
"""Rendered rows per page of the selected path."""
INLINE_LIMIT = 50
"""Compacted ranges up to this long render their originals inline (collapsed); longer ones load on demand."""
FRAGMENT_LIMIT = 50
"""Rows per lazily loaded fragment (the default of a "load more")."""
LARGE_FRAGMENT = 500
"""Rows of a "load 500" step through a long branch or compacted range."""
FRAGMENT_MAX = 1_000
"""Most rows one fragment request may ask for."""
WINDOW_BEFORE = 10
"""Rows shown before a focused message inside a long compacted range (the range opens at it)."""
MAX_LEAVES = 50
"""Leaves listed in the branch picker (newest first)."""
HITS_PER_PAGE = 20
"""Search hits listed per page on the tree page."""
EXCERPT_CHARS = 90


@dataclass(frozen=True)
class Urls:
    """Where the page links to: itself (with a query string), the fragment view and the long-text view."""

    page: str
    fragment: str
    text: str = ""
    compaction: str = ""  # the compaction record's admin page, with "{}" for its key
    model_input: str = ""  # the model-input page ("" when the user may not see model inputs)

    def input_of(self, message_id: str) -> str:
        """The page of the exact input of the recorded call that produced ``message_id``."""
        return f"{self.model_input}?{urlencode({'message': message_id})}" if self.model_input else ""

    def compaction_record(self, key: object) -> str:
        return self.compaction.replace("{}", quote(str(key), safe="")) if self.compaction and key is not None else ""

    def select(self, message_id: str) -> str:
        return f"{self.page}?{urlencode({'leaf': message_id})}#msg-{quote(message_id, safe='')}"

    def focus(self, leaf: str, message_id: str) -> str:
        """The page of ``leaf``'s path that holds ``message_id``, scrolled to it."""
        return f"{self.page}?{urlencode({'leaf': leaf, 'focus': message_id})}#msg-{quote(message_id, safe='')}"

    def page_link(self, leaf: str, page: int) -> str:
        return f"{self.page}?{urlencode({'leaf': leaf, 'page': page})}"

    def chain(self, start: str, *, toward: str = "", until: str = "", n: int = 0) -> str:
        query = {k: v for k, v in {"node": start, "toward": toward, "until": until, "n": n}.items() if v}
        return f"{self.fragment}?{urlencode(query)}"

    def text_of(self, **what: str) -> str:
        """Where the rest of a long text loads from (``node=``, ``compaction=`` or ``block=``)."""
        return f"{self.text}?{urlencode(what)}" if self.text else ""


@dataclass(frozen=True)
class Links:
    """Links relative to the selected path: to a message on it (keeping the path) or off it (selecting its branch)."""

    urls: Urls
    leaf: str
    on_path: set[str]

    def to(self, message_id: str) -> str:
        if message_id in self.on_path:
            return self.urls.focus(self.leaf, message_id)
        return self.urls.select(message_id)


@dataclass(frozen=True)
class Stub:
    """A branch not rendered yet: its first message's shape and where to load or select it."""

    node: Node
    size: int
    leaf_id: str
    load_url: str
    select_url: str
    large_url: str = ""  # the same, in steps of LARGE_FRAGMENT rows


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
    parent_url: str = ""
    focus_url: str = ""
    text_url: str = ""
    input_url: str = ""  # the model input of the recorded call that wrote it, if one did


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
    large_url: str = ""
    summary: Clip | None = None
    summary_url: str = ""
    record_url: str = ""
    from_url: str = ""
    to_url: str = ""
    opened: bool = False  # the range holds the focused message and opens at it
    before: Stub | None = None
    after: Stub | None = None


@dataclass(frozen=True)
class LeafView:
    node: Node
    selected: bool
    url: str
    excerpt: str
    created_at: object


@dataclass
class FocusView:
    """The focused message with its links and the context the model had (the panel)."""

    node: Node
    created_at: object
    parent_url: str
    children: int
    compaction: StoredCompaction | None
    compaction_url: str
    record: object
    panel: ContextPanel | None  # None: the user may not see context blocks


@dataclass
class Hits:
    """One page of a search inside the session, with the true total."""

    query: str
    found: Matches
    rows: list[tuple]
    page: int
    pages: int
    page_urls: list[tuple[int, str, bool]]
    error: str = ""

    @property
    def first(self) -> int:
        return (self.page - 1) * HITS_PER_PAGE + 1


def _stub(
    tree: Tree, kid: str, urls: Urls, *, size: int | None = None, toward: str = "", until: str = "", n: int = 0
) -> Stub:
    leaf = tree.latest_leaf_in.get(kid, kid)
    return Stub(
        node=tree.nodes[kid],
        size=tree.size.get(kid, 1) if size is None else size,
        leaf_id=leaf,
        load_url=urls.chain(kid, toward=toward, until=until, n=n),
        select_url=urls.select(leaf),
        large_url=urls.chain(kid, toward=toward, until=until, n=LARGE_FRAGMENT),
    )


def _stubs(tree: Tree, parent_id: str | None, skip: str | None, urls: Urls) -> list[Stub]:
    """Children of ``parent_id`` (roots for None) other than ``skip``, the one rendered below it."""
    return [_stub(tree, kid, urls) for kid in tree.children.get(parent_id, []) if kid != skip]


def _row(
    tree: Tree,
    node: Node,
    contents: dict,
    urls: Urls,
    *,
    next_id: str | None,
    links: Links | None = None,
    recorded: set[str] | frozenset[str] = frozenset(),
    **flags: bool,
) -> Row:
    message, created_at = contents.get(node.seq, ({}, None))
    parent = node.parent_id if node.parent_id in tree.nodes else None
    go = links.to if links else urls.select
    return Row(
        node=node,
        parts=part_views(message),
        created_at=created_at,
        child_count=len(tree.kids(node.id)),
        stubs=_stubs(tree, node.id, next_id, urls),
        select_url=urls.select(tree.latest_leaf_in.get(node.id, node.id)),
        parent_url=go(parent) if parent else "",
        focus_url=go(node.id),
        text_url=urls.text_of(node=node.id),
        input_url=urls.input_of(node.id) if node.id in recorded else "",
        **flags,
    )


def load_overlay_rows(session_id: str, *, using: str = "default") -> list[tuple[int, StoredCompaction]]:
    """Every overlay of the session with its admin key, oldest first (one query)."""
    rows = Compaction.objects.using(using).filter(session_id=session_id).order_by("seq")
    return [
        (c.seq, StoredCompaction(c.compaction_id, c.summary, c.from_message_id, c.to_message_id, c.created_at))
        for c in rows
    ]


def tree_context(
    session_id: str,
    urls: Urls,
    *,
    leaf: str = "",
    focus: str = "",
    at: str = "",
    page: int | None = None,
    query: str = "",
    hits_page: int = 1,
    record: object = None,
    using: str = "default",
    blocks: bool = True,
) -> dict:
    """Everything the tree template needs for one page of the path to the selected leaf.

    ``leaf`` (any message) selects the path through it, ``focus`` a message to open at (keeping
    the path when it lies on it), ``at`` the first message at or after a time; ``query`` searches
    the session. See :func:`navigation.resolve`. ``blocks`` False leaves the context blocks and the
    frozen prompt out of the panel (the user may not see them).
    """
    tree = load_tree(session_id, using=using)
    context: dict = {"tree": tree, "message_count": len(tree.nodes), "urls": urls, "query": query}
    if not tree.nodes:
        return context
    target = resolve(tree, session_id, leaf=leaf, focus=focus, at=at, using=using)
    leaf_id, focus = target.leaf, target.focus
    path = tree.path_to(leaf_id)
    next_on_path = {a.id: b.id for a, b in zip(path, path[1:], strict=False)}
    on_path = set(next_on_path) | {leaf_id}
    overlays = load_overlay_rows(session_id, using=using)
    compactions = [c for _, c in overlays]
    items = fold_overlays(path, compactions)
    pages = paginate(items, PER_PAGE, inline_limit=INLINE_LIMIT)
    index = _page_index(pages, items, focus, page)
    start, stop = pages[index]
    shown = items[start:stop]
    windows = {i: _window(item, focus) for i, item in enumerate(shown) if item.overlay is not None}
    leaves = tree.leaves()
    listed = leaves[:MAX_LEAVES]
    seqs = [n.seq for i, item in enumerate(shown) for n in _rendered_nodes(item, windows.get(i))]
    contents = fetch_contents([*seqs, *(n.seq for n in listed), tree.nodes[focus].seq], using=using)
    links = Links(urls, leaf_id, on_path)
    recorded = _recorded(session_id, tree, seqs, urls, using=using)

    def row(node: Node) -> Row:
        return _row(
            tree,
            node,
            contents,
            urls,
            next_id=next_on_path.get(node.id),
            active=True,
            selected=node.id == leaf_id,
            focus=node.id == focus,
            links=links,
            recorded=recorded,
        )

    overlay_keys = {c.id: key for key, c in overlays}
    entries = [
        _entry(tree, item, row, urls, leaf_id, windows.get(i), overlays_seq=overlay_keys, links=links, focus=focus)
        for i, item in enumerate(shown)
    ]
    root = path[0].id
    focus_node = tree.nodes[focus]
    focus_created = contents.get(focus_node.seq, ({}, None))[1]
    hits = _hits(session_id, query, hits_page, tree, links, using=using) if query else None
    context.update(
        unknown_leaf=bool(target.missing),
        missing_id=target.missing,
        bad_time=target.bad_time,
        leaf=tree.nodes[leaf_id],
        focus_id=focus,
        focus=None
        if query
        else _focus_view(
            session_id, tree, focus_node, focus_created, items, overlays, links, record, using=using, blocks=blocks
        ),
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
        leaves=[_leaf_view(n, n.id == leaf_id, urls, contents) for n in listed],
        leaf_count=len(leaves),
        branch_points=sum(1 for parent, kids in tree.children.items() if parent is not None and len(kids) > 1),
        detached=tree.detached,
        cycles=tree.cycles,
        hits=hits,
    )
    return context


def _window(item: PathItem, focus: str) -> tuple[int, int] | None:
    """Rows ``(lo, hi)`` of a long compacted range rendered because the focused message is inside it."""
    if item.weight <= INLINE_LIMIT:
        return None
    ids = [n.id for n in item.nodes]
    if focus not in ids:
        return None
    lo = max(0, ids.index(focus) - WINDOW_BEFORE)
    return lo, min(item.weight, lo + FRAGMENT_LIMIT)


def _rendered_nodes(item: PathItem, window: tuple[int, int] | None = None) -> tuple[Node, ...]:
    if item.overlay is None or item.weight <= INLINE_LIMIT:
        return item.nodes
    return item.nodes[window[0] : window[1]] if window else ()


def _entry(
    tree: Tree,
    item: PathItem,
    row,
    urls: Urls,
    leaf_id: str,
    window: tuple[int, int] | None = None,
    *,
    overlays_seq: dict[str, int] | None = None,
    links: Links | None = None,
    focus: str = "",
) -> Entry:
    if item.overlay is None:
        return Entry(row=row(item.nodes[0]))
    overlay = item.overlay
    summary = clip(overlay.summary or "")
    first, last = item.nodes[0].id, item.nodes[-1].id
    entry = Entry(
        overlay=overlay,
        range_size=item.weight,
        range_tokens=sum(n.tokens or 0 for n in item.nodes),
        branch_count=sum(len(tree.kids(n.id)) for n in item.nodes) - (item.weight - 1) - (last != leaf_id),
        summary=summary,
        summary_url=urls.text_of(compaction=overlay.id) if summary.rest else "",
        record_url=urls.compaction_record(overlays_seq.get(overlay.id)) if overlays_seq else "",
        from_url=links.to(first) if links else "",
        to_url=links.to(last) if links else "",
    )
    if item.weight <= INLINE_LIMIT:
        entry.originals = [row(n) for n in item.nodes]
        entry.opened = any(n.id == focus for n in item.nodes)
    elif window:
        lo, hi = window
        entry.opened = True
        entry.originals = [row(n) for n in item.nodes[lo:hi]]
        if lo:
            entry.before = _stub(tree, first, urls, size=lo, toward=leaf_id, until=item.nodes[lo - 1].id)
        if hi < item.weight:
            entry.after = _stub(tree, item.nodes[hi].id, urls, size=item.weight - hi, toward=leaf_id, until=last)
    else:
        entry.lazy_url = urls.chain(first, toward=leaf_id, until=last)
        entry.large_url = urls.chain(first, toward=leaf_id, until=last, n=LARGE_FRAGMENT)
    return entry


def _leaf_view(node: Node, selected: bool, urls: Urls, contents: dict) -> LeafView:
    message, created_at = contents.get(node.seq, ({}, None))
    words = " ".join(text_content(message).split()) or next(
        (f"[{p.tool_name}]" for p in part_views(message) if p.kind == "tool"), ""
    )
    excerpt = words if len(words) <= EXCERPT_CHARS else words[: EXCERPT_CHARS - 1] + "…"
    return LeafView(node, selected, urls.select(node.id), excerpt, created_at)


def _focus_view(
    session_id: str,
    tree: Tree,
    node: Node,
    created_at: object,
    items: list[PathItem],
    overlays: list[tuple[int, StoredCompaction]],
    links: Links,
    record: object,
    *,
    using: str,
    blocks: bool = True,
) -> FocusView:
    """The focused message's links (parent, compaction record, session) and its context panel."""
    holder = next((i.overlay for i in items if i.overlay is not None and node in i.nodes), None)
    seq = {c.id: s for s, c in overlays}
    parent = node.parent_id if node.parent_id in tree.nodes else None
    return FocusView(
        node=node,
        created_at=created_at,
        parent_url=links.to(parent) if parent else "",
        children=len(tree.kids(node.id)),
        compaction=holder,
        compaction_url=links.urls.compaction_record(seq.get(holder.id)) if holder else "",
        record=record,
        panel=_with_text_urls(load_panel(session_id, created_at, using=using), links.urls) if blocks else None,
    )


def _with_text_urls(panel: ContextPanel, urls: Urls) -> ContextPanel:
    def linked(block: BlockView) -> BlockView:
        return replace(block, text_url=urls.text_of(block=block.key)) if block.content.rest else block

    return ContextPanel(prompt=linked(panel.prompt) if panel.prompt else None, blocks=[linked(b) for b in panel.blocks])


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


def _hits(session_id: str, query: str, page: int, tree: Tree, links: Links, *, using: str) -> Hits:
    """A page of the session's messages matching ``query``, best first, with the true total (two queries)."""
    found = matches(query, using=using, session_id=session_id)
    pages = max(1, -(-found.count // HITS_PER_PAGE))
    page = min(max(page, 1), pages)
    try:
        results = search(
            query,
            session_id=session_id,
            limit=HITS_PER_PAGE,
            offset=(page - 1) * HITS_PER_PAGE,
            using=using,
            summaries=False,  # the page lists messages (their count is ``found``); overlays show in the tree
        )
    except (AgentSessionsError, ValueError) as exc:
        return Hits(query, found, [], 1, 1, [], error=str(exc))
    rows = [
        (hit, tree.nodes.get(hit.id), links.to(hit.id) if hit.id in tree.nodes else "", _marked(hit.snippet or ""))
        for hit in results
    ]
    wanted = sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)})
    base = f"{links.urls.page}?{urlencode({'leaf': links.leaf, 'q': query})}"
    page_urls = [(n, f"{base}&hits={n}#as-hits", n == page) for n in wanted]
    return Hits(query, found, rows, page, pages, page_urls)


def _marked(snippet: str) -> list[tuple[str, bool]]:
    """A snippet's ``**highlighted**`` runs as ``(text, highlighted)`` pieces for the template to escape."""
    return [(piece, i % 2 == 1) for i, piece in enumerate(snippet.split("**")) if piece]


def fragment_context(
    session_id: str,
    urls: Urls,
    *,
    start: str,
    toward: str = "",
    until: str = "",
    using: str = "default",
    limit: int = FRAGMENT_LIMIT,
) -> dict:
    """A chain of up to ``limit`` rows from ``start`` (a branch or a compacted range).

    Side branches inside it show as stubs; a longer chain ends in a stub that
    loads the rest (in steps of the same size, or of :data:`LARGE_FRAGMENT`).
    """
    limit = min(max(limit, 1), FRAGMENT_MAX)
    tree = load_tree(session_id, using=using)
    if start not in tree.nodes:
        return {"rows": [], "missing": True}
    chain = tree.chain_from(start, toward=toward or None, until=until or None)
    shown, rest = chain[:limit], chain[limit:]
    contents = fetch_contents([n.seq for n in shown], using=using)
    recorded = _recorded(session_id, tree, [n.seq for n in shown], urls, using=using)
    on_path = {n.id for n in tree.path_to(toward)} if toward else set()
    rows = []
    for i, node in enumerate(shown):
        nxt = chain[i + 1].id if i + 1 < len(chain) else None
        rows.append(_row(tree, node, contents, urls, next_id=nxt, active=node.id in on_path, recorded=recorded))
    more = None
    if rest:
        more = _stub(
            tree,
            rest[0].id,
            urls,
            size=len(rest),
            toward=toward,
            until=until,
            n=limit if limit != FRAGMENT_LIMIT else 0,
        )
    return {"rows": rows, "more": more, "urls": urls}


def _recorded(session_id: str, tree: Tree, seqs: list[int], urls: Urls, *, using: str) -> set[str]:
    """The rendered assistant rows a recorded model call wrote (one query; none when inputs are not linked)."""
    if not urls.model_input:
        return set()
    wanted = set(seqs)
    ids = [n.id for n in tree.nodes.values() if n.seq in wanted and n.role == "assistant"]
    return recorded_replies(session_id, ids, using=using) if ids else set()
