"""Shared plumbing of the operator commands: ``--database``, ``--no-progress`` and tqdm bars.

Bars go to stderr, so commands that write data to stdout (``export_sessions``)
stay pipeable; ``--verbosity 0`` or ``--no-progress`` silences them.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand
from django.db import router
from tqdm import tqdm

from agent_sessions.models import Compaction, Message, SessionRecord


class ProgressCommand(BaseCommand):
    """A command with a database alias option and progress bars on stderr."""

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--database", default=None, help="Database alias (default: what the routers pick for agent_sessions)."
        )
        parser.add_argument("--no-progress", action="store_true", help="Do not show progress bars.")

    def execute(self, *args: Any, **options: Any) -> Any:
        self.verbosity = int(options.get("verbosity", 1))
        self.no_progress = bool(options.get("no_progress"))
        return super().execute(*args, **options)

    def alias(self, options: dict, model: type = Message) -> str:
        """The alias given with ``--database``, or the router's choice for ``model``."""
        return options.get("database") or router.db_for_write(model)

    def bar(self, *, total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> tqdm:
        """A tqdm bar on this command's stderr (the real stream, so carriage returns work)."""
        stream = getattr(self.stderr, "_out", sys.stderr)
        quiet = self.verbosity == 0 or self.no_progress
        return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=quiet, dynamic_ncols=True, **kwargs)


def known_session_ids(using: str) -> list[str]:
    """Every session id with a registry row, messages or overlays, sorted (the default namespace too)."""
    ids: set[str] = set(SessionRecord.objects.using(using).values_list("id", flat=True))
    for model in (Message, Compaction):
        ids.update(model.objects.using(using).order_by().values_list("session_id", flat=True).distinct())
    return sorted(ids)


def session_exists(using: str, session_id: str) -> bool:
    """True when the id has a registry row, messages or overlays."""
    return any(
        qs.exists()
        for qs in (
            SessionRecord.objects.using(using).filter(id=session_id),
            Message.objects.using(using).filter(session_id=session_id),
            Compaction.objects.using(using).filter(session_id=session_id),
        )
    )
