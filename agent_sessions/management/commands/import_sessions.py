"""``manage.py import_sessions FILE [--replace]``: read back what ``export_sessions`` wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError
from django.db import DatabaseError, transaction

from agent_sessions.exceptions import InvalidMessage

from . import _archive
from ._base import ProgressCommand


class Command(ProgressCommand):
    help = (
        "Import sessions from an export_sessions JSON Lines file (or '-' for stdin), all in one "
        "transaction. Refuses to overwrite an existing session unless --replace."
    )

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("path", metavar="FILE", help="JSON Lines file written by export_sessions, or '-'.")
        parser.add_argument(
            "--replace", action="store_true", help="Delete an existing session (and its blocks) before importing it."
        )

    def handle(self, *args: Any, path: str, replace: bool, **options: Any) -> None:
        using = self.alias(options)
        stream = sys.stdin if path == "-" else self._open(path)
        total = None if path == "-" else Path(path).stat().st_size
        sessions = messages = 0
        try:
            bar = self.bar(total=total, desc="import", unit="B", unit_scale=True)
            with transaction.atomic(using=using), bar:
                for number, line in enumerate(stream, start=1):
                    bar.update(len(line.encode("utf-8")))
                    if line.strip():
                        messages += self._import_line(using, line, number, replace)
                        sessions += 1
        except (InvalidMessage, _archive.ArchiveError, KeyError, TypeError, DatabaseError) as exc:
            raise CommandError(f"{path}: {exc} (nothing was imported)") from exc
        finally:
            if stream is not sys.stdin:
                stream.close()
        if self.verbosity:
            self.stdout.write(self.style.SUCCESS(f"Imported {sessions} session(s), {messages} message(s)."))

    def _open(self, path: str):
        try:
            return Path(path).open(encoding="utf-8")  # noqa: SIM115 - closed in handle()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc

    def _import_line(self, using: str, line: str, number: int, replace: bool) -> int:
        try:
            document = json.loads(line)
        except ValueError as exc:
            raise _archive.ArchiveError(f"line {number}: not JSON ({exc})") from None
        try:
            session_id = _archive.check_document(document)
        except _archive.ArchiveError as exc:
            raise _archive.ArchiveError(f"line {number}: {exc}") from None
        if _archive.conflicts(using, document):
            if not replace:
                raise _archive.ArchiveError(f"session {session_id!r} already exists; pass --replace to overwrite it")
            _archive.remove_existing(using, document)
        return _archive.import_session(using, document)
