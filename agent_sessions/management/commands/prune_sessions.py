"""``manage.py prune_sessions --days N [--dry-run]``: delete ended sessions idle for N days."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from agent_sessions.manager import SessionManager
from agent_sessions.models import CompactionJob, SessionRecord

from ._base import ProgressCommand


class Command(ProgressCommand):
    help = (
        "Delete sessions that have ended (end_reason set) and were last updated more than N days ago, "
        "with their messages, overlays, namespaced context blocks and compaction job."
    )

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--days", type=int, required=True, help="Minimum age in days, by updated_at.")
        parser.add_argument("--dry-run", action="store_true", help="List what would be deleted; delete nothing.")

    def handle(self, *args: Any, days: int, dry_run: bool, **options: Any) -> None:
        if days < 0:
            raise CommandError("--days must be zero or more")
        using = self.alias(options, SessionRecord)
        cutoff = timezone.now() - timedelta(days=days)
        candidates = (
            SessionRecord.objects.using(using)
            .exclude(end_reason__isnull=True)
            .exclude(end_reason="")
            .filter(updated_at__lt=cutoff)
            .order_by("updated_at", "id")
        )
        rows = list(candidates.values_list("id", "name", "end_reason", "updated_at"))
        for sid, name, reason, updated in rows:
            if dry_run or self.verbosity > 1:
                self.stdout.write(f"{sid}\t{name}\t{reason}\t{updated.isoformat()}")
        if dry_run:
            self.stdout.write(f"Would delete {len(rows)} session(s) ended before {cutoff:%Y-%m-%d %H:%M} UTC.")
            return
        manager = SessionManager(using=using)
        with self.bar(total=len(rows), desc="prune", unit="session") as bar:
            for sid, *_ in rows:
                manager.delete(sid)
                CompactionJob.objects.using(using).filter(session_id=sid).delete()
                bar.update(1)
        self.stdout.write(self.style.SUCCESS(f"Deleted {len(rows)} session(s)."))
