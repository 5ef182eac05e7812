"""The goals table: each goal as ours ÷ a reference, computed from one run's results."""

from __future__ import annotations

from dataclasses import dataclass

from .harness import Result, fmt_time

PEERS = ("openai-agents", "langchain")
"""Name prefixes of the peer implementations (see bench/peers.py)."""


@dataclass(frozen=True)
class Goal:
    """``ours`` ÷ ``reference`` of one workload must be ≤ ``limit``."""

    label: str
    workload: str
    ours: str
    reference: str  # an impl name, a prefix ending in "*", or "best peer"
    limit: float


GOALS = (
    Goal("append with compact_after ÷ plain append", "1.", "ours + compact_after", "ours", 1.1),
    Goal(
        "SessionManager.append ÷ Session.append_message (the registry row's upkeep)",
        "1.",
        "ours, SessionManager.append",
        "ours",
        1.5,
    ),
    Goal(
        "… both with prepared statements",
        "1.",
        "ours, SessionManager.append, prepared",
        "ours, prepared statements",
        1.5,
    ),
    Goal("plain append ÷ langchain PostgresChatMessageHistory", "1.", "ours", "langchain*", 1.5),
    Goal("… both with prepared statements (psycopg's default)", "1.", "ours, prepared statements", "langchain*", 1.5),
    Goal("history of the whole path ÷ raw recursive CTE", "3a.", "ours", "raw SQL", 1.0),
    Goal("history of the whole path ÷ openai-agents get_items", "3a.", "ours", "openai-agents*", 1.0),
    Goal("history ÷ raw range scan (the floor of ours, no branches)", "3a.", "ours", "raw range scan", 1.2),
    Goal("last 50 (get_recent_history) ÷ raw", "3b.", "ours", "raw SQL", 1.2),
    Goal("last 50 ÷ raw range scan (the floor of ours, no branches)", "3b.", "ours", "raw range scan", 1.2),
    Goal(
        "… both with prepared statements",
        "3b.",
        "ours, prepared statements",
        "raw range scan, prepared statements",
        1.2,
    ),
    Goal(
        "… the range scan always on its generic plan",
        "3b.",
        "ours, prepared statements",
        "raw range scan, prepared, force_generic_plan",
        1.2,
    ),
    Goal("recent window within a byte budget ÷ raw", "3d.", "ours", "raw SQL", 1.2),
    Goal("recent window within a byte budget ÷ raw range scan", "3d.", "ours", "raw range scan", 1.2),
    Goal("search, 2 English words ÷ raw", "4.", "ours", "raw SQL", 1.2),
    Goal("fork ÷ one raw INSERT … SELECT", "5.", "ours", "raw SQL", 1.5),
    Goal("append_all ÷ raw executemany", "2.", "ours", "raw SQL", 1.1),
    Goal("append_all ÷ best peer", "2.", "ours", "best peer", 1.5),
    Goal(
        "model_call + finish ÷ a turn without records (get_history + append)",
        "8.",
        "recorded turn",
        "unrecorded turn",
        1.5,
    ),
    Goal("finish (append + record) ÷ bare append_message", "8.", "finish (append + record)", "bare append", 1.5),
    Goal("HTTP append: s/request ÷ bare ninja (req/s ≥ 0.7×)", "7. HTTP append", "ours", "bare ninja", 1 / 0.7),
    Goal("HTTP history: s/request ÷ bare ninja (req/s ≥ 0.7×)", "7. HTTP history", "ours", "bare ninja", 1 / 0.7),
    Goal("HTTP search: s/request ÷ bare ninja (req/s ≥ 0.7×)", "7. HTTP search", "ours", "bare ninja", 1 / 0.7),
    Goal("async C=64, 2.5 ms round trip: ours ÷ best peer (ops/s ≥)", "9. async C=64, 2.5", "ours", "best peer", 1.0),
    Goal(
        "async C=64, 2.5 ms: AgentsSession ÷ SQLAlchemySession (ops/s ≥)",
        "9. async C=64, 2.5 ms",
        "ours, AgentsSession",
        "openai-agents*",
        1.0,
    ),
    Goal("async C=1, 0 ms: ours ÷ before the pool (ops/s ≥ 0.9×)", "9. async C=1, 0 ", "ours", "ours, before*", 1.11),
)


def _pick(rows: list[Result], name: str) -> Result | None:
    if name == "best peer":
        peers = [r for r in rows if r.impl.startswith(PEERS)]
        return min(peers, key=lambda r: r.median_s) if peers else None
    if name.endswith("*"):
        return next((r for r in rows if r.impl.startswith(name[:-1])), None)
    return next((r for r in rows if r.impl == name), None)


def evaluate(results: list[Result]) -> list[dict]:
    """One row per (goal, database) that this run measured: ours, reference, ratio, goal, met."""
    table = []
    for database in dict.fromkeys(r.database for r in results):
        for goal in GOALS:
            rows = [r for r in results if r.database == database and r.workload.startswith(goal.workload)]
            ours, reference = _pick(rows, goal.ours), _pick(rows, goal.reference)
            if ours is None or reference is None or reference.median_s == 0:
                continue
            ratio = ours.median_s / reference.median_s
            table.append(
                {
                    "goal": goal.label,
                    "database": database,
                    "ours": ours.median_s,
                    "reference": reference.impl,
                    "reference_s": reference.median_s,
                    "ratio": ratio,
                    "limit": goal.limit,
                    "met": ratio <= goal.limit,
                }
            )
    return table


def print_goals(table: list[dict]) -> None:
    """The goals table as measured: ours ÷ reference against each goal."""
    header = f"{'goal':<54} {'db':<9} {'ours':>10} {'reference':>10} {'ratio':>7} {'goal':>7}  met?  (reference)"
    print(header)
    print("-" * len(header))
    for row in table:
        print(
            f"{row['goal']:<54} {row['database']:<9} {fmt_time(row['ours']):>10} {fmt_time(row['reference_s']):>10} "
            f"{row['ratio']:>7.2f} {'≤ ' + format(row['limit'], '.2f'):>7}  {'yes' if row['met'] else 'NO':<4}  "
            f"({row['reference']})"
        )
