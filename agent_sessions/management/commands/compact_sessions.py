"""``manage.py compact_sessions [ID ...] [--all] [--config NAME] [--sync]``: compact now.

With ``--config`` the named configuration (a registered SessionManager) is used
and the work is enqueued on Celery (``agent_sessions.tasks.enqueue_compaction``),
or run here with ``--sync``.  Enqueued work is reported as sent: published, skipped
(one is already queued or running) or failed to publish (exit status 1).  Without it the offline extractive summariser
compacts here: a worker cannot rebuild an unnamed configuration.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from agent_sessions import tasks
from agent_sessions.compaction import create_compact_function
from agent_sessions.models import SessionRecord
from agent_sessions.session import Session
from agent_sessions.summarizers import extractive_summarizer

from ._base import ProgressCommand, known_session_ids, session_exists

# Job and run statuses (agent_sessions.tasks) as the summary line reports them.
REPORTED = {"succeeded": "compacted", "idle": "nothing to compact", "pending": "queued", "running": "busy"}
# What an enqueue did, when a worker (not this process) runs the task.
SENT = {
    tasks.PUBLISHED: "published",
    tasks.JOINED: "skipped (already queued or running)",
    tasks.UNSENT: "failed to publish",
}


class Command(ProgressCommand):
    help = (
        "Compact sessions now (one, several, or --all open ones): enqueue on Celery with a registered "
        "configuration (--config NAME), or run inline (--sync; always so with the default extractive summariser)."
    )

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("session_ids", nargs="*", metavar="SESSION_ID")
        parser.add_argument("--all", action="store_true", help="Every session that has not ended (no end_reason).")
        parser.add_argument("--config", default=None, help="Registered configuration name (SessionManager(name=...)).")
        parser.add_argument("--sync", action="store_true", help="Run in this process instead of enqueueing.")
        parser.add_argument("--leaf", default=None, help="Compact the branch ending at this message (one session).")
        extractive = parser.add_argument_group("extractive summariser (without --config)")
        extractive.add_argument("--protect-head", type=int, default=3, help="Leading messages kept (default 3).")
        extractive.add_argument(
            "--tail-token-budget", type=int, default=20_000, help="Recent tokens kept verbatim (default 20000)."
        )
        extractive.add_argument("--min-tail-messages", type=int, default=2, help="Recent messages kept (default 2).")

    def handle(self, *args: Any, session_ids: list[str], all: bool, config: str | None, **options: Any) -> None:
        using = self.alias(options)
        ids = self._targets(using, session_ids, all, options["leaf"])
        build = self._builder(config, using, options)
        outcomes: dict[str, int] = {}
        failures: list[str] = []
        self.unsent: list[str] = []
        with self.bar(total=len(ids), desc="compact", unit="session") as bar:
            for sid in ids:
                try:
                    status = self._compact_one(sid, config, build, using, options)
                except Exception as exc:  # noqa: BLE001 - report it, go on with the others
                    status = "failed"
                    failures.append(f"{sid}: {type(exc).__name__}: {exc}")
                outcomes[status] = outcomes.get(status, 0) + 1
                if self.verbosity > 1:
                    self.stdout.write(f"{sid}\t{status}")
                bar.update(1)
        summary = ", ".join(f"{count} {status}" for status, count in sorted(outcomes.items())) or "nothing to do"
        self.stdout.write(f"Compaction: {summary}.")
        if failures:
            raise CommandError("compaction failed for:\n" + "\n".join(failures))
        if self.unsent:
            raise CommandError(
                "could not publish to the broker (the jobs stay pending and are re-sent by the workers):\n"
                + "\n".join(self.unsent)
            )

    def _targets(self, using: str, session_ids: list[str], all: bool, leaf: str | None) -> list[str]:
        if all == bool(session_ids):
            raise CommandError("name the sessions to compact, or pass --all (not both)")
        if leaf is not None and len(session_ids) != 1:
            raise CommandError("--leaf needs exactly one session id")
        if not all:
            missing = [sid for sid in session_ids if not session_exists(using, sid)]
            if missing:
                raise CommandError(f"no such session: {', '.join(missing)}")
            return list(dict.fromkeys(session_ids))
        ended = set(SessionRecord.objects.using(using).exclude(end_reason__isnull=True).values_list("id", flat=True))
        return [sid for sid in known_session_ids(using) if sid and sid not in ended]

    def _builder(self, config: str | None, using: str, options: dict):
        """``fn(session_id) -> Session`` for inline runs; checks a configuration name up front."""
        if config is not None:
            try:
                tasks.load_session(config, "")
            except LookupError as exc:
                raise CommandError(f"{exc} (is its module imported? see AGENT_SESSIONS_CONFIG_MODULES)") from exc
            return lambda sid: tasks.load_session(config, sid)
        fn = create_compact_function(
            extractive_summarizer,
            protect_head=options["protect_head"],
            tail_token_budget=options["tail_token_budget"],
            min_tail_messages=options["min_tail_messages"],
        )
        return lambda sid: Session.create(using=using).for_session(sid).on_compaction(fn)

    def _compact_one(self, sid: str, config: str | None, build, using: str, options: dict) -> str:
        if config is not None and not options["sync"]:
            job = tasks.enqueue_compaction(config, sid, options["leaf"], force=True, using=using)
            if job.outcome == tasks.UNSENT:
                self.unsent.append(f"{sid}: {job.last_error}")
                return SENT[job.outcome]
            if job.status == "failed":  # eager mode ran it already (or the configuration broke)
                raise RuntimeError(job.last_error)
            if not tasks.runs_eagerly():  # a worker runs it: report what was sent, not a guess
                return SENT[job.outcome]
            status = str(job.status)
        else:
            outcome = tasks.run_compaction(
                build(sid), leaf_id=options["leaf"], force=True, config_name=config or "", using=using
            )
            status = outcome["status"]
        return REPORTED.get(status, status)
