"""Adapters for the libraries users would pick instead, each with a tiny common surface.

Peers are optional (requirements-bench.txt); a missing one is reported, not fatal.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path
from typing import Any


class OpenAIAgentsSQLite:
    """openai-agents ``SQLiteSession`` (its own file, same machine)."""

    name = "openai-agents SQLiteSession"

    def __init__(self) -> None:
        from agents.memory import SQLiteSession

        self._loop = asyncio.new_event_loop()
        path = str(Path(tempfile.mkdtemp(prefix="bench-oa-")) / "oa.sqlite3")
        self._session = SQLiteSession(f"bench-{uuid.uuid4().hex[:8]}", db_path=path)

    def _run(self, coro) -> Any:
        return self._loop.run_until_complete(coro)

    def append(self, item: dict) -> None:
        self._run(self._session.add_items([item]))

    def append_all(self, items: list[dict]) -> None:
        self._run(self._session.add_items(items))

    def history(self) -> list:
        return self._run(self._session.get_items())

    def recent(self, n: int) -> list:
        return self._run(self._session.get_items(limit=n))

    def reset(self) -> None:
        """Empty the session (workloads that read back need exactly their own items in it)."""
        self._run(self._session.clear_session())

    def close(self) -> None:
        self._session.close()
        self._loop.close()


class OpenAIAgentsSQLAlchemy(OpenAIAgentsSQLite):
    """openai-agents ``SQLAlchemySession`` on Postgres (asyncpg)."""

    name = "openai-agents SQLAlchemySession"

    def __init__(self, dsn: dict) -> None:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        self._loop = asyncio.new_event_loop()
        url = f"postgresql+asyncpg://{dsn['USER']}@{dsn['HOST']}:{dsn['PORT']}/{dsn['NAME']}"
        self._session = SQLAlchemySession.from_url(
            f"bench-{uuid.uuid4().hex[:8]}",
            url=url,
            create_tables=True,
            sessions_table="bench_oa_sessions",
            messages_table="bench_oa_messages",
        )

    def close(self) -> None:
        self._run(self._session.engine.dispose())
        self._loop.close()


class LangchainPostgres:
    """langchain-postgres ``PostgresChatMessageHistory`` (sync psycopg)."""

    name = "langchain PostgresChatMessageHistory"

    def __init__(self, dsn: dict) -> None:
        import psycopg
        from langchain_postgres import PostgresChatMessageHistory

        self._conn = psycopg.connect(
            host=dsn["HOST"], port=dsn["PORT"], user=dsn["USER"], dbname=dsn["NAME"], autocommit=True
        )
        PostgresChatMessageHistory.create_tables(self._conn, "bench_langchain")
        self._history = PostgresChatMessageHistory("bench_langchain", str(uuid.uuid4()), sync_connection=self._conn)

    @staticmethod
    def _message(item: dict):
        from langchain_core.messages import AIMessage, HumanMessage

        return (HumanMessage if item["role"] == "user" else AIMessage)(content=item["content"])

    def append(self, item: dict) -> None:
        self._history.add_messages([self._message(item)])

    def append_all(self, items: list[dict]) -> None:
        self._history.add_messages([self._message(i) for i in items])

    def history(self) -> list:
        return self._history.get_messages()

    def recent(self, n: int) -> list | None:
        return None  # no windowed read in its API

    def reset(self) -> None:
        self._history.clear()

    def close(self) -> None:
        self._conn.close()


def available(database: str, dsn: dict) -> list[Any]:
    """Instantiate every peer that runs on this database; skip those not installed."""
    makers = (
        [OpenAIAgentsSQLite]
        if database == "sqlite"
        else [lambda: OpenAIAgentsSQLAlchemy(dsn), lambda: LangchainPostgres(dsn)]
    )
    peers = []
    for make in makers:
        try:
            peers.append(make())
        except ImportError as exc:
            print(f"  (peer skipped: {exc})")
    return peers
