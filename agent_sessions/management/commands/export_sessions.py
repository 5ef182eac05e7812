"""``manage.py export_sessions [ID ...] [--all] [-o FILE]``: sessions as JSON Lines, one session per line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from agent_sessions.models import Message

from . import _archive
from ._base import ProgressCommand, known_session_ids, session_exists


class Command(ProgressCommand):
    help = (
        "Export sessions as JSON Lines: one line per session with its record, every message row "
        "(parent ids, so branches survive), compaction overlays and namespaced context blocks. "
        "import_sessions reads the file back."
    )

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("session_ids", nargs="*", metavar="SESSION_ID", help="Sessions to export.")
        parser.add_argument("--all", action="store_true", help="Export every session.")
        parser.add_argument("-o", "--output", default="-", help="File to write (default: stdout).")

    def handle(self, *args: Any, session_ids: list[str], all: bool, output: str, **options: Any) -> None:
        using = self.alias(options)
        if all == bool(session_ids):
            raise CommandError("name the sessions to export, or pass --all (not both)")
        ids = known_session_ids(using) if all else list(dict.fromkeys(session_ids))
        missing = [sid for sid in ids if not session_exists(using, sid)]
        if missing:
            raise CommandError(f"no such session: {', '.join(missing)}")
        messages = Message.objects.using(using)
        total = messages.count() if all else messages.filter(session_id__in=ids).count()
        if output == "-":
            self._export(using, ids, total, self.stdout.write)
            return
        with Path(output).open("w", encoding="utf-8") as stream:
            self._export(using, ids, total, lambda line: stream.write(line + "\n"))
        if self.verbosity:
            self.stderr.write(f"Exported {len(ids)} session(s) to {output}.")

    def _export(self, using: str, ids: list[str], total: int, emit) -> None:
        with self.bar(total=total, desc="export", unit="msg") as bar:
            for sid in ids:
                emit(_archive.dump(_archive.export_session(using, sid, on_message=lambda: bar.update(1))))
