"""The benchmark harness's interleaving: each implementation once a round, in an order that changes."""

from __future__ import annotations

from bench.harness import interleaved_medians


def _recording(names: list[str], calls: list[str]) -> dict:
    return {name: (lambda name=name: calls.append(name)) for name in names}


def test_every_implementation_runs_once_a_round_in_a_changing_order():
    names = ["ours", "raw SQL", "raw range scan", "peer"]
    calls: list[str] = []
    medians = interleaved_medians(_recording(names, calls), rounds=20)
    assert set(medians) == set(names)
    rounds = [calls[i : i + len(names)] for i in range(0, len(calls), len(names))]
    assert len(rounds) == 20
    assert all(sorted(r) == sorted(names) for r in rounds)
    # No implementation always follows the same one (the fixed order's bias): ours ran after
    # at least two different others, and first in some round.
    before_ours = {r[r.index("ours") - 1] if r.index("ours") else None for r in rounds}
    assert len(before_ours - {None}) >= 2
    assert None in before_ours


def test_the_order_is_seeded_so_reruns_compare():
    names = ["a", "b", "c", "d", "e"]
    first: list[str] = []
    again: list[str] = []
    other: list[str] = []
    interleaved_medians(_recording(names, first), rounds=10)
    interleaved_medians(_recording(names, again), rounds=10)
    interleaved_medians(_recording(names, other), rounds=10, seed=2)
    assert first == again
    assert first != other
