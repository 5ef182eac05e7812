"""Where a tree-page request lands: the selected leaf and the focused message, from ids or a point in time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..models import Message
from .tree_layout import Tree


@dataclass(frozen=True)
class Target:
    """The leaf whose path is shown, the message the page opens at, and what could not be found."""

    leaf: str
    focus: str
    missing: str = ""  # a requested id that is not in the session
    bad_time: str = ""  # a time that does not parse, or after which the path has no message


def parse_time(value: str) -> datetime | None:
    """An ISO date-time (``datetime-local`` inputs send ``2026-12-01T08:30``); naive means the current time zone."""
    try:
        moment = parse_datetime(value.strip())
    except ValueError:
        return None
    if moment is not None and timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


def first_at_or_after(session_id: str, path_ids: set[str], moment: datetime, *, using: str) -> str | None:
    """The earliest message of the path created at or after ``moment`` (one query, read until found)."""
    rows = (
        Message.objects.using(using)
        .filter(session_id=session_id, created_at__gte=moment)
        .order_by("created_at", "seq")
        .values_list("message_id", flat=True)
    )
    for message_id in rows.iterator(chunk_size=2000):
        if message_id in path_ids:
            return message_id
    return None


def resolve(
    tree: Tree, session_id: str, *, leaf: str = "", focus: str = "", at: str = "", using: str = "default"
) -> Target:
    """The leaf and focus for ``?leaf=&focus=&at=``.

    ``leaf`` alone selects the latest leaf below that message and focuses the message;
    ``focus`` on the selected path keeps the path (else its own latest leaf is selected);
    ``at`` focuses the first message of the path created at or after that time.
    """
    # With every row on a parent cycle (stored by another writer) nothing is childless: the newest
    # row stands in, and its path runs up to the cycle.
    latest = tree.latest_leaf() or max(tree.nodes.values(), key=lambda n: n.seq, default=None)
    missing = ""
    if leaf and leaf not in tree.nodes:
        missing, leaf = leaf, ""
    if focus and focus not in tree.nodes:
        missing, focus = focus, ""
    chosen = tree.latest_leaf_in.get(leaf, leaf) if leaf else (latest.id if latest else "")
    path = {n.id for n in tree.path_to(chosen)}
    if focus and focus not in path:
        chosen = tree.latest_leaf_in.get(focus, focus)
        path = {n.id for n in tree.path_to(chosen)}
    target = focus or leaf or chosen
    if at:
        moment = parse_time(at)
        found = first_at_or_after(session_id, path, moment, using=using) if moment else None
        if found is None:
            return Target(chosen, target, missing, bad_time=at)
        target = found
    return Target(chosen, target, missing)
