"""Render context blocks into the system prompt."""

from __future__ import annotations

from collections.abc import Iterable

from .block import ContextBlock

BAR = "═" * 46


def block_tag(block: ContextBlock) -> str:
    """``[searchable]``, ``[loadable]``, ``[readonly]`` or ``[writable]``, checked in that order."""
    if block.is_searchable:
        return "[searchable]"
    if block.is_skill:
        return "[loadable]"
    return "[writable]" if block.writable else "[readonly]"


def block_header(block: ContextBlock) -> str:
    """``LABEL (description) [pct% — tokens/max tokens] [tag]``."""
    parts = [block.label.upper()]
    if block.description:
        parts.append(f"({block.description})")
    if block.max_tokens is not None:
        pct = round(block.tokens / block.max_tokens * 100) if block.max_tokens else 100
        parts.append(f"[{pct}% — {block.tokens}/{block.max_tokens} tokens]")
    parts.append(block_tag(block))
    return " ".join(parts)


def render_block(block: ContextBlock) -> str:
    """One block: bar, header, bar, content."""
    return "\n".join([BAR, block_header(block), BAR, block.content])


def render_system_prompt(blocks: Iterable[ContextBlock]) -> str:
    """Blocks in order, separated by a blank line; empty readonly blocks are skipped."""
    shown = [b for b in blocks if b.content or b.writable or b.is_skill or b.is_searchable]
    return "\n\n".join(render_block(b) for b in shown)
