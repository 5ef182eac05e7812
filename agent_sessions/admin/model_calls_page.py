"""Template context of the model-call pages: a reply's exact input, a session's call timeline, two siblings compared.

Every page reads a bounded number of rows whatever the session's size: the timeline one page
of calls plus one aggregate pass, the input page ``Session.model_input`` (three queries: the
call, its content, the path) and the replies' siblings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, Max, QuerySet, Sum

from ..models import Message, ModelCallRecord
from ..session import Session
from ..types import COMPACTION_PREFIX
from .navigation import parse_time
from .parts import PartView, part_views

CALLS_PER_PAGE = 50
"""Calls listed per page of the timeline."""
INPUT_PER_PAGE = 50
"""Messages-as-sent listed per page of a model input (each is shown whole)."""
SLOW_MS = 10_000.0
"""The "slow" preset of the timeline: calls that took at least this long (the page lets one set another bound)."""
EXPENSIVE = 0.05
"""The "expensive" preset: calls that cost at least this much (same unit as the records' ``cost``)."""
CHUNK = 900
"""Ids per ``IN (…)`` query (SQLite's old variable limit, with room to spare)."""


def recorded_replies(session_id: str, message_ids: Iterable[str], *, using: str) -> set[str]:
    """Which of ``message_ids`` a recorded call produced (one query per :data:`CHUNK` ids)."""
    wanted = sorted(set(message_ids))
    found: set[str] = set()
    for start in range(0, len(wanted), CHUNK):
        rows = ModelCallRecord.objects.using(using).filter(
            session_id=session_id, message_id__in=wanted[start : start + CHUNK]
        )
        found.update(rows.values_list("message_id", flat=True))
    return found


def usage_tokens(usage: Any) -> tuple[int, int]:
    """``(input, output)`` tokens of a usage dict in the common shapes (OpenAI, Anthropic, AI SDK); 0 when absent."""
    if isinstance(usage, str):
        try:
            usage = json.loads(usage)
        except ValueError:
            return 0, 0
    if not isinstance(usage, dict):
        return 0, 0

    def first(*keys: str) -> int:
        for key in keys:
            value = usage.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return int(value)
        return 0

    return (
        first("input_tokens", "prompt_tokens", "inputTokens", "promptTokens"),
        first("output_tokens", "completion_tokens", "outputTokens", "completionTokens"),
    )


# ── the input of one reply ──────────────────────────────────────────────
@dataclass
class SentMessage:
    """A message as the model got it; a compaction summary standing in for a range is marked."""

    position: int
    id: str
    role: str
    summary: bool
    parts: list[PartView]


@dataclass
class Sibling:
    """Another reply to the same parent (a regeneration) and where to compare with it."""

    id: str
    role: str
    recorded: bool
    compare_url: str
    input_url: str


def sent_message(position: int, message: dict) -> SentMessage:
    mid = str(message.get("id") or "")
    return SentMessage(
        position, mid, str(message.get("role") or ""), mid.startswith(COMPACTION_PREFIX), part_views(message)
    )


def pretty_json(value: Any) -> str:
    """Indented JSON of a record field, exactly as stored (nothing cut)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def read_input(session_id: str, message_id: str, *, using: str) -> dict[str, Any] | None:
    """``Session.model_input`` of a reply in the database ``using`` (None: no recorded call produced it)."""
    return Session.create(using=using).for_session(session_id).model_input(message_id)


def siblings(session_id: str, message_id: str, *, using: str) -> list[tuple[str, str]]:
    """``(id, role)`` of the other children of the reply's parent, oldest first (one query; none for a root)."""
    parent = (
        Message.objects.using(using)
        .filter(session_id=session_id, message_id=message_id)
        .values_list("parent_id", flat=True)
        .first()
    )
    if parent is None:
        return []
    rows = (
        Message.objects.using(using)
        .filter(session_id=session_id, parent_id=parent)
        .exclude(message_id=message_id)
        .order_by("seq")
        .values_list("message_id", "role")
    )
    return list(rows[:50])


def input_context(
    session_id: str, message_id: str, *, page: int, input_url: Any, compare_url: Any, using: str
) -> dict[str, Any] | None:
    """The input page of ``message_id``: the record's fields, one page of the messages sent, the siblings."""
    seen = read_input(session_id, message_id, using=using)
    if seen is None:
        return None
    sent = seen["messages"]
    pages = max(1, -(-len(sent) // INPUT_PER_PAGE))
    page = min(max(page, 1), pages)
    start = (page - 1) * INPUT_PER_PAGE
    shown = [sent_message(start + i + 1, m) for i, m in enumerate(sent[start : start + INPUT_PER_PAGE])]
    others = siblings(session_id, message_id, using=using)
    recorded = recorded_replies(session_id, [mid for mid, _ in others], using=using)
    tokens_in, tokens_out = usage_tokens(seen["usage"])
    return {
        "call": seen,
        "message_id": message_id,
        "system": seen["system"],
        "tools_json": pretty_json(seen["tools"]),
        "tool_count": len(seen["tools"]),
        "params_json": pretty_json(seen["params"]),
        "usage_json": pretty_json(seen["usage"]),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "sent": shown,
        "sent_count": len(sent),
        "summary_count": sum(1 for m in sent if str(m.get("id") or "").startswith(COMPACTION_PREFIX)),
        "page": page,
        "pages": pages,
        "page_urls": [(n, input_url(message_id, n), n == page) for n in _nearby(page, pages)],
        "siblings": [
            Sibling(
                mid, role, mid in recorded, compare_url(message_id, mid), input_url(mid, 1) if mid in recorded else ""
            )
            for mid, role in others
        ],
    }


def _nearby(page: int, pages: int) -> list[int]:
    return sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)})


# ── the timeline of a session's calls ───────────────────────────────────
@dataclass(frozen=True)
class Filters:
    """The timeline's filters, from the query string (bad values are ignored and reported)."""

    model: str = ""
    status: str = ""
    since: datetime | None = None
    until: datetime | None = None
    min_latency_ms: float | None = None
    min_cost: float | None = None
    errors: tuple[str, ...] = ()

    @classmethod
    def parse(cls, get: Any) -> Filters:
        errors: list[str] = []

        def moment(name: str) -> datetime | None:
            raw = (get.get(name) or "").strip()
            if not raw:
                return None
            value = parse_time(raw)
            if value is None:
                errors.append(f"{name}: not a date-time ({raw!r})")
            return value

        def number(name: str, preset: str, default: float) -> float | None:
            raw = (get.get(name) or "").strip()
            if raw:
                try:
                    value = float(raw)
                except ValueError:
                    errors.append(f"{name}: not a number ({raw!r})")
                    return None
                if value != value or value < 0:
                    errors.append(f"{name}: must be a number ≥ 0")
                    return None
                return value
            return default if get.get(preset) else None

        return cls(
            model=(get.get("model") or "").strip(),
            status=(get.get("status") or "").strip(),
            since=moment("since"),
            until=moment("until"),
            min_latency_ms=number("min_latency_ms", "slow", SLOW_MS),
            min_cost=number("min_cost", "expensive", EXPENSIVE),
            errors=tuple(errors),
        )

    def apply(self, rows: QuerySet) -> QuerySet:
        if self.model:
            rows = rows.filter(model=self.model)
        if self.status:
            rows = rows.filter(status=self.status)
        if self.since:
            rows = rows.filter(started_at__gte=self.since)
        if self.until:
            rows = rows.filter(started_at__lte=self.until)
        if self.min_latency_ms is not None:
            rows = rows.filter(latency_ms__gte=self.min_latency_ms)
        if self.min_cost is not None:
            rows = rows.filter(cost__gte=self.min_cost)
        return rows

    def query(self) -> dict[str, str]:
        """The filters as query-string values (for the page links and the form)."""
        out = {
            "model": self.model,
            "status": self.status,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "min_latency_ms": _num(self.min_latency_ms),
            "min_cost": _num(self.min_cost),
        }
        return {k: v for k, v in out.items() if v}


def _num(value: float | None) -> str:
    return "" if value is None else (str(int(value)) if value == int(value) else str(value))


@dataclass
class CallRow:
    """One call of the timeline."""

    call_id: str
    started_at: object
    model: str
    latency_ms: float | None
    tokens_in: int
    tokens_out: int
    cost: float | None
    status: str
    error: str
    message_id: str | None
    input_url: str = ""


@dataclass
class Totals:
    calls: int = 0
    cost: float = 0.0
    latency_ms: float = 0.0
    max_latency_ms: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    by_status: dict[str, int] = field(default_factory=dict)

    @property
    def mean_latency_ms(self) -> float:
        return self.latency_ms / self.calls if self.calls else 0.0


def totals(rows: QuerySet) -> Totals:
    """Count, cost and latency by the database (one query per status), tokens summed from the usage JSON (one pass)."""
    out = Totals()
    for status, n, cost, latency, longest in (
        rows.order_by()
        .values_list("status")
        .annotate(Count("seq"), Sum("cost"), Sum("latency_ms"), Max("latency_ms"))
        .values_list("status", "seq__count", "cost__sum", "latency_ms__sum", "latency_ms__max")
    ):
        out.calls += n
        out.cost += cost or 0.0
        out.latency_ms += latency or 0.0
        out.max_latency_ms = max(out.max_latency_ms, longest or 0.0)
        out.by_status[status] = n
    for usage in rows.order_by().exclude(usage=None).values_list("usage", flat=True).iterator(chunk_size=2000):
        tokens_in, tokens_out = usage_tokens(usage)
        out.tokens_in += tokens_in
        out.tokens_out += tokens_out
    return out


def timeline_context(
    session_id: str, filters: Filters, *, page: int, page_url: str, input_url: Any, using: str
) -> dict[str, Any]:
    """One page of the session's calls (newest first) under ``filters``, with their totals and the filter choices."""
    calls = ModelCallRecord.objects.using(using).filter(session_id=session_id)
    chosen = filters.apply(calls)
    total = totals(chosen)
    pages = max(1, -(-total.calls // CALLS_PER_PAGE))
    page = min(max(page, 1), pages)
    start = (page - 1) * CALLS_PER_PAGE
    fields = ("call_id", "started_at", "model", "latency_ms", "usage", "cost", "status", "error", "message_id")
    rows = []
    for r in chosen.order_by("-started_at", "-seq").values(*fields)[start : start + CALLS_PER_PAGE]:
        tokens_in, tokens_out = usage_tokens(r.pop("usage"))
        row = CallRow(tokens_in=tokens_in, tokens_out=tokens_out, **r)
        row.input_url = input_url(row.message_id, 1) if row.message_id else ""
        rows.append(row)
    base = filters.query()

    def link(**extra: Any) -> str:
        return f"{page_url}?{urlencode({**base, **extra})}"

    return {
        "rows": rows,
        "totals": total,
        "filters": filters,
        "filter_query": base,
        "models": list(calls.order_by("model").values_list("model", flat=True).distinct()[:200]),
        "statuses": ["ok", "error", "cancelled", "unfinished"],
        "page": page,
        "pages": pages,
        "first": start + 1,
        "page_urls": [(n, link(page=n), n == page) for n in _nearby(page, pages)],
        "slow_url": f"{page_url}?{urlencode({**base, 'min_latency_ms': _num(SLOW_MS)})}",
        "expensive_url": f"{page_url}?{urlencode({**base, 'min_cost': _num(EXPENSIVE)})}",
        "clear_url": page_url,
        "slow_ms": SLOW_MS,
        "expensive": EXPENSIVE,
        "filtered": bool(base),
    }
