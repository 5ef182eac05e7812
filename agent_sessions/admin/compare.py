"""Two sibling replies side by side: the differences of what each model was given and of what it wrote.

Each side is cut into lines (a message sent is one line of compact JSON, a text its own lines),
the common head and tail are set aside (siblings share their whole history) and ``difflib``
aligns the rest, so a 10,000-message input compares in the time its differing part needs.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

LINE_CHARS = 2_000
"""A line longer than this is cut in the comparison (its message is shown whole on the input page)."""
CONTEXT = 2
"""Equal lines kept around each difference; longer equal runs fold into "N equal lines"."""
MAX_ROWS = 400
"""Rows a section renders; the differing lines past it are counted, not shown (two unrelated replies)."""


@dataclass(frozen=True)
class Cell:
    """One side of a row: its line number and text as ``(piece, changed)`` runs."""

    number: int | None
    pieces: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class DiffRow:
    kind: str  # "equal", "replace", "delete", "insert" or "skip" (folded equal lines)
    left: Cell | None = None
    right: Cell | None = None
    skipped: int = 0


@dataclass
class Section:
    """One field compared: its title, whether the sides differ, and the aligned rows."""

    title: str
    same: bool
    rows: list[DiffRow] = field(default_factory=list)
    changed: int = 0
    hidden: int = 0  # rows past MAX_ROWS, not rendered


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + f" … (+{len(line) - LINE_CHARS} chars)"


def json_lines(value: Any) -> list[str]:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str).splitlines()


def message_lines(messages: list[dict]) -> list[str]:
    """One line per message: ``role id: parts`` in compact JSON (summaries are the ``compaction_…`` ids)."""
    out = []
    for m in messages:
        body = json.dumps(m.get("parts"), ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
        out.append(_cut(f"{m.get('role', '?')} {m.get('id', '?')}: {body}"))
    return out


def text_lines(value: str | None) -> list[str]:
    return [_cut(line) for line in (value or "").splitlines()] or ([""] if value is not None else [])


WORD = re.compile(r"\w+|\s+|[^\w\s]")


def _marked(a: str, b: str) -> tuple[tuple[tuple[str, bool], ...], tuple[tuple[str, bool], ...]]:
    """The two lines as runs, the words that differ marked (whole words read better than scattered letters)."""
    wa, wb = WORD.findall(a), WORD.findall(b)
    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    left: list[tuple[str, bool]] = []
    right: list[tuple[str, bool]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if i2 > i1:
            left.append(("".join(wa[i1:i2]), op != "equal"))
        if j2 > j1:
            right.append(("".join(wb[j1:j2]), op != "equal"))
    return tuple(left), tuple(right)


def side_by_side(title: str, a: list[str], b: list[str]) -> Section:
    """The aligned rows of ``a`` (left) and ``b`` (right), equal runs longer than 2×:data:`CONTEXT` folded."""
    if a == b:
        return Section(title, True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    ops: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes():
        ops.append((str(tag), i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    section = Section(title, False)
    last = len(ops) - 1
    for index, (op, i1, i2, j1, j2) in enumerate(ops):
        if op == "equal":
            keep_before = CONTEXT if index > 0 else 0
            keep_after = CONTEXT if index < last else 0
            n = i2 - i1
            if n > keep_before + keep_after + 1:
                section.rows += [_same(a, i, j1 + (i - i1)) for i in range(i1, i1 + keep_before)]
                section.rows.append(DiffRow("skip", skipped=n - keep_before - keep_after))
                section.rows += [_same(a, i, j1 + (i - i1)) for i in range(i2 - keep_after, i2)]
            else:
                section.rows += [_same(a, i, j1 + (i - i1)) for i in range(i1, i2)]
            continue
        section.changed += max(i2 - i1, j2 - j1)
        room = max(0, MAX_ROWS - len(section.rows))
        section.hidden += max(0, max(i2 - i1, j2 - j1) - room)
        for k in range(min(room, max(i2 - i1, j2 - j1))):
            i, j = i1 + k, j1 + k
            left_line = a[i] if i < i2 else None
            right_line = b[j] if j < j2 else None
            if left_line is not None and right_line is not None:
                lp, rp = _marked(left_line, right_line)
                section.rows.append(DiffRow("replace", Cell(i + 1, lp), Cell(j + 1, rp)))
            elif left_line is not None:
                section.rows.append(DiffRow("delete", Cell(i + 1, ((left_line, True),)), None))
            else:
                section.rows.append(DiffRow("insert", None, Cell(j + 1, ((right_line or "", True),))))
    if len(section.rows) > MAX_ROWS:
        section.hidden += len(section.rows) - MAX_ROWS
        del section.rows[MAX_ROWS:]
    return section


def _same(a: list[str], i: int, j: int) -> DiffRow:
    return DiffRow("equal", Cell(i + 1, ((a[i], False),)), Cell(j + 1, ((a[i], False),)))


def compare_inputs(left: dict | None, right: dict | None, left_reply: dict, right_reply: dict) -> list[Section]:
    """Sections of the comparison: the reply itself, then each field of the two inputs (an absent input is empty)."""
    a, b = left or {}, right or {}

    def fields(seen: dict) -> dict[str, Any]:
        return {k: seen.get(k) for k in ("model", "params", "usage", "cost", "latency_ms", "status", "error")}

    return [
        side_by_side(
            "Output (the reply as stored)", json_lines(left_reply.get("parts")), json_lines(right_reply.get("parts"))
        ),
        side_by_side("Model, parameters and outcome", json_lines(fields(a)), json_lines(fields(b))),
        side_by_side("System text", text_lines(a.get("system")), text_lines(b.get("system"))),
        side_by_side(
            "Messages as sent", message_lines(a.get("messages") or []), message_lines(b.get("messages") or [])
        ),
        side_by_side("Tools", json_lines(a.get("tools") or []), json_lines(b.get("tools") or [])),
    ]
