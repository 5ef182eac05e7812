"""``manage.py import_sessions FILE [--replace]``: read back what ``export_sessions`` wrote.

The file is untrusted: a first pass checks every line (see ``_archive_checks``) and writes
nothing; only a file that passes is written, all in one transaction.  Errors name the line
and the field (``line 3: messages[2].created_at: not an ISO 8601 timestamp``).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from django.core.management.base import CommandError
from django.db import DatabaseError, transaction

from . import _archive, _archive_checks
from ._base import ProgressCommand
from ._fields import BadField


class Command(ProgressCommand):
    help = (
        "Import sessions from an export_sessions JSON Lines file (or '-' for stdin): every line is "
        "checked first, then all are written in one transaction. Refuses to overwrite an existing "
        "session unless --replace."
    )

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("path", metavar="FILE", help="JSON Lines file written by export_sessions, or '-'.")
        parser.add_argument(
            "--replace", action="store_true", help="Delete an existing session (and its blocks) before importing it."
        )
        parser.add_argument(
            "--owner",
            default=None,
            metavar="USERNAME",
            help="Owner of the imported sessions whose line names none (who sees them in the API; staff see all).",
        )

    def handle(self, *args: Any, path: str, replace: bool, owner: str | None = None, **options: Any) -> None:
        using = self.alias(options)
        try:
            self.owner = _archive.owner_named(owner, using)
        except _archive.ArchiveError as exc:
            raise CommandError(f"{exc} (nothing was imported)") from exc
        stream = self._spool_stdin() if path == "-" else self._open(path)
        total = None if path == "-" else Path(path).stat().st_size
        sessions = messages = 0
        try:
            checked = self._check(stream, total)
            _archive_checks.check_owners(using, checked)
            for number, document in checked:
                if not replace and _archive.conflicts(using, _labels_only(document)):
                    raise _archive.ArchiveError(
                        f"line {number}: session {document.session_id!r} already exists; pass --replace to overwrite it"
                    )
            stream.seek(0)
            bar = self.bar(total=total, desc="import", unit="B", unit_scale=True)
            with transaction.atomic(using=using), bar:
                for number, document in self._documents(stream, bar):
                    messages += self._import(using, document, number, replace)
                    sessions += 1
        except (_archive.ArchiveError, ValueError, KeyError, TypeError, DatabaseError) as exc:
            raise CommandError(f"{path}: {exc} (nothing was imported)") from exc
        finally:
            stream.close()
        if self.verbosity:
            self.stdout.write(self.style.SUCCESS(f"Imported {sessions} session(s), {messages} message(s)."))

    def _open(self, path: str) -> IO[bytes]:
        try:
            return Path(path).open("rb")  # noqa: SIM115 - closed in handle()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc

    def _spool_stdin(self) -> IO[bytes]:
        """Standard input copied to a temporary file, so it can be read twice (check, then write)."""
        spool = tempfile.TemporaryFile("w+b")  # noqa: SIM115 - closed in handle()
        source = getattr(sys.stdin, "buffer", None)
        if source is not None:
            shutil.copyfileobj(source, spool)
        else:  # a text stream put in its place (tests, embedding)
            for chunk in iter(lambda: sys.stdin.read(1 << 16), ""):
                spool.write(chunk.encode("utf-8", "surrogatepass"))
        spool.seek(0)
        return spool

    def _check(self, stream: IO[bytes], total: int | None) -> list[tuple[int, _archive_checks.Checked]]:
        """First pass: every line checked, nothing written; session ids must not repeat."""
        checked: list[tuple[int, _archive_checks.Checked]] = []
        lines: dict[str, int] = {}
        with self.bar(total=total, desc="check", unit="B", unit_scale=True) as bar:
            for number, document in self._documents(stream, bar):
                result = _check_line(document, number)
                if result.session_id in lines:
                    raise _archive.ArchiveError(
                        f"line {number}: session_id: {result.session_id!r} is also on line {lines[result.session_id]}"
                    )
                lines[result.session_id] = number
                checked.append((number, result))
        return checked

    def _documents(self, stream: IO[bytes], bar: Any) -> Iterator[tuple[int, Any]]:
        """``(line number, parsed JSON)`` of each non-blank line."""
        for number, raw in enumerate(stream, start=1):
            bar.update(len(raw))
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise _archive.ArchiveError(f"line {number}: not UTF-8 text") from None
            if line.strip():
                yield number, _parse(line, number)

    def _import(self, using: str, document: Any, number: int, replace: bool) -> int:
        # Again (the file may have changed since the first pass); message contents are checked as they are stored.
        checked = _check_line(document, number, contents=False)
        if _archive.conflicts(using, document):
            if not replace:
                raise _archive.ArchiveError(
                    f"line {number}: session {checked.session_id!r} already exists; pass --replace to overwrite it"
                )
            _archive.remove_existing(using, document)
        return _archive.import_session(using, document, owner=self.owner)


def _parse(line: str, number: int) -> Any:
    try:
        return json.loads(line)
    except RecursionError:
        raise _archive.ArchiveError(f"line {number}: not JSON (nested too deeply)") from None
    except ValueError as exc:
        raise _archive.ArchiveError(f"line {number}: not JSON ({exc})") from None


def _check_line(document: Any, number: int, *, contents: bool = True) -> _archive_checks.Checked:
    try:
        return _archive_checks.check_document(document, contents=contents)
    except (BadField, _archive.ArchiveError) as exc:
        raise _archive.ArchiveError(f"line {number}: {exc}") from None


def _labels_only(checked: _archive_checks.Checked) -> dict:
    """The part of a document ``_archive.conflicts`` reads, rebuilt from the first pass."""
    return {
        "session_id": checked.session_id,
        "context_blocks": [{"label": label} for where, label in checked.labels if where.startswith("context_blocks")],
        "search_entries": [{"label": label} for where, label in checked.labels if where.startswith("search_entries")],
    }
