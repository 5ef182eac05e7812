"""``manage.py search_sessions "query"``: full-text search over messages, from the shell."""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.management.base import CommandError

from agent_sessions.manager import SessionManager
from agent_sessions.search.query import parse
from agent_sessions.search.snippet import excerpt
from agent_sessions.session import Session

from ._base import ProgressCommand


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class Command(ProgressCommand):
    help = "Search messages of every session (or one, with --session); prints session id, message id, role, snippet."

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("query", help='Words are ANDed; "a phrase", a OR b and -excluded work too.')
        parser.add_argument("--session", default=None, help="Search only this session.")
        parser.add_argument("--limit", type=int, default=20, help="Most results to print (default 20).")
        parser.add_argument("--json", action="store_true", help="One JSON object per line instead of columns.")

    def handle(self, *args: Any, query: str, session: str | None, limit: int, **options: Any) -> None:
        if limit < 1:
            raise CommandError("--limit must be at least 1")
        using = options.get("database")
        if session is not None:
            results = Session.create(using=using).for_session(session).search(query, limit=limit)
        else:
            results = SessionManager(using=using).search(query, limit=limit)
        if not results:
            self.stderr.write("No results found.")
            return
        words = parse(query).words()
        for hit in results:
            session_id = hit.session_id if hit.session_id is not None else session
            snippet = _one_line(hit.snippet or excerpt(hit.content, words))
            if options["json"]:
                row = {"session_id": session_id, "id": hit.id, "role": hit.role, "snippet": snippet}
                self.stdout.write(json.dumps(row, ensure_ascii=False))
            else:
                self.stdout.write(f"{session_id}\t{hit.id}\t{hit.role}\t{snippet}")
