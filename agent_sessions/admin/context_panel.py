"""What stood behind a message: its frozen system prompt, the session's context blocks, and linked records."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q, QuerySet

from ..manager.rows import known_labels
from ..models import ContextBlockRecord
from ..storage import owners
from ..storage.owners import PROMPT_KEY
from .parts import Clip, clip


@dataclass(frozen=True)
class BlockView:
    """A stored context block (or the frozen prompt) as the panel shows it."""

    label: str
    key: str
    content: Clip
    updated_at: object
    changed_after: bool  # written after the focused message was created
    chars: int
    text_url: str = ""  # where the rest of a long value loads from (set by the page)


@dataclass
class ContextPanel:
    """The focused message's context: the prompt the model was given and the blocks it was rendered from."""

    prompt: BlockView | None = None
    blocks: list[BlockView] = field(default_factory=list)


def block_keys(session_id: str) -> tuple[list[str], str]:
    """The stored prompt's keys (per-session first) and the suffix shown stripped from the session's block keys."""
    if not session_id:
        return [PROMPT_KEY], ""
    return [f"{PROMPT_KEY}_{session_id}", PROMPT_KEY], f"_{session_id}"


def _rows(session_id: str, using: str) -> QuerySet:
    """The session's own rows (owned, or ownerless under its exact keys) and the default namespace's prompt."""
    own = owners.owned(ContextBlockRecord, using, session_id, known_labels())
    shared = Q(label=PROMPT_KEY) & (Q(session_id__isnull=True) | Q(session_id=""))
    return own | ContextBlockRecord.objects.using(using).filter(shared)


def load_panel(session_id: str, created_at: object, *, using: str) -> ContextPanel:
    """The session's frozen prompt and own blocks (one query), flagged when written after ``created_at``."""
    prompt_keys, suffix = block_keys(session_id)
    rows = {r.label: r for r in _rows(session_id, using).order_by("label")}

    def view(row: ContextBlockRecord) -> BlockView:
        label = row.label[: -len(suffix)] if suffix and row.label.endswith(suffix) else row.label
        later = bool(created_at and row.updated_at and row.updated_at > created_at)
        return BlockView(label, row.label, clip(row.content or ""), row.updated_at, later, len(row.content or ""))

    prompt = next((rows[k] for k in prompt_keys if k in rows), None)
    blocks = [view(r) for key, r in rows.items() if key not in prompt_keys]
    return ContextPanel(prompt=view(prompt) if prompt else None, blocks=blocks)


def block_text(session_id: str, key: str, *, using: str) -> str | None:
    """A stored block's whole content, only when it belongs to this session's panel."""
    return _rows(session_id, using).filter(label=key).values_list("content", flat=True).first()
