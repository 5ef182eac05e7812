"""``manage.py import_openai_transcript FILE``: an OpenAI Chat Completions transcript → a new session."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError
from django.db import DatabaseError, transaction

from agent_sessions.exceptions import InvalidMessage
from agent_sessions.models import ContextBlockRecord, SessionRecord
from agent_sessions.storage.orm import DjangoSessionProvider

from . import _archive, _archive_checks, _openai, _transcript_checks
from ._base import ProgressCommand, session_exists
from ._fields import BadField

BATCH = 500


class Command(ProgressCommand):
    help = (
        "Import a JSON file of OpenAI Chat Completions messages as a new session: leading system "
        "messages become a context block (or a first message), tool calls and their results become "
        "tool-<name> parts of the assistant messages."
    )

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("path", metavar="FILE", help="A JSON list of messages, or an object with 'messages'.")
        parser.add_argument("--session-id", default=None, help="Id of the new session (default: a new uuid4 hex).")
        parser.add_argument("--name", default=None, help="Session name (default: the file name without suffix).")
        parser.add_argument("--model", default=None, help="Model to record (default: the file's 'model', if any).")
        parser.add_argument("--source", default="openai-transcript", help="Source to record on the session.")
        parser.add_argument(
            "--owner",
            default=None,
            metavar="USERNAME",
            help="Owner of the new session (who sees it in the API); without one only staff see it.",
        )
        parser.add_argument(
            "--system-as",
            choices=("context", "message"),
            default="context",
            help="Leading system messages become a context block (default) or stay the first message(s).",
        )
        parser.add_argument(
            "--system-label",
            default="soul",
            help="Label of that context block; stored as '<label>_<session id>' so .with_context(label) finds it.",
        )

    def handle(self, *args: Any, path: str, session_id: str | None, **options: Any) -> None:
        using = self.alias(options)
        data = self._load(path)
        session_id = session_id or uuid.uuid4().hex
        model = options["model"] or (data.get("model") if isinstance(data, dict) else None)
        name = options["name"] or Path(path).stem
        system_as_message = options["system_as"] == "message"
        try:
            owner = _archive.owner_named(options.get("owner"), using)
        except _archive.ArchiveError as exc:
            raise CommandError(f"{exc} (nothing was imported)") from exc
        try:
            messages = _openai.message_list(data)
            _transcript_checks.check_messages(messages, system_as_message=system_as_message)
            _transcript_checks.check_options(
                session_id=session_id,
                name=name,
                model=model,
                source=options["source"],
                system_label=options["system_label"],
            )
            converted = _openai.convert(messages, system_as_message=system_as_message)
        except (_openai.TranscriptError, BadField) as exc:
            raise CommandError(f"{path}: {exc} (nothing was imported)") from exc
        if session_exists(using, session_id):
            raise CommandError(f"session {session_id!r} already exists")
        if converted.system:
            self._refuse_foreign_label(using, f"{options['system_label']}_{session_id}", session_id)
        try:
            with transaction.atomic(using=using):
                SessionRecord.objects.using(using).create(
                    id=session_id, name=name, model=model, source=options["source"], owner=owner
                )
                if converted.system:
                    label = f"{options['system_label']}_{session_id}"
                    ContextBlockRecord.objects.using(using).update_or_create(
                        label=label, defaults={"content": "\n\n".join(converted.system), "session_id": session_id}
                    )
                storage = DjangoSessionProvider(session_id, using=using)
                storage.mark_registered()  # its row was made just above
                self._append(storage, converted.messages)
        except (InvalidMessage, DatabaseError) as exc:
            raise CommandError(f"{path}: {exc} (nothing was imported)") from exc
        for warning in converted.warnings:
            self.stderr.write(self.style.WARNING(warning))
        if self.verbosity:
            self.stdout.write(
                self.style.SUCCESS(f"Imported {len(converted.messages)} message(s) into session {session_id}.")
            )

    def _refuse_foreign_label(self, using: str, label: str, session_id: str) -> None:
        """``<label>_<id>`` must not also be a block of a longer existing session id (``memory_user`` + ``X``)."""
        owners = _archive_checks.existing_sessions(using, set(_archive_checks.other_owners(label, session_id)))
        if owners:
            owner = max(owners, key=len)
            raise CommandError(f"--system-label: {label!r} belongs to session {owner!r}, not this one")

    def _load(self, path: str) -> Any:
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        except RecursionError:
            raise CommandError(f"cannot read {path}: JSON nested too deeply") from None

    def _append(self, storage: DjangoSessionProvider, messages: list[dict]) -> None:
        """Append the chain in batches (each batch under the previous one's last message)."""
        parent: str | None = None
        with self.bar(total=len(messages), desc="import", unit="msg") as bar:
            for start in range(0, len(messages), BATCH):
                batch = messages[start : start + BATCH]
                storage.append_messages_bulk(batch, parent)
                parent = batch[-1]["id"]
                bar.update(len(batch))
