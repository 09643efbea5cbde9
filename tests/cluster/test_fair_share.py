"""fair_share: who should own which process (pure: no database)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_core.cluster.assignment import NodeInfo, fair_share

NODE_IDS = [f"n{i}" for i in range(6)]


@st.composite
def situations(draw: st.DrawFn) -> tuple[list[str], list[NodeInfo], dict[str, str]]:
    processes = draw(st.lists(st.sampled_from([f"p{i:02d}" for i in range(40)]),
                              max_size=40, unique=True))
    ids = draw(st.lists(st.sampled_from(NODE_IDS), max_size=5, unique=True))
    nodes = [NodeInfo(node_id, max_processes=draw(st.none() | st.integers(0, 12)),
                      stopping=draw(st.sampled_from([False, False, False, True])))
             for node_id in ids]
    # current owners: live nodes, nodes that are gone, and processes nobody holds
    owners = {p: owner for p in processes
              if (owner := draw(st.none() | st.sampled_from(NODE_IDS))) is not None}
    return processes, nodes, owners


def counts(result: dict[str, str]) -> Counter[str]:
    return Counter(result.values())


def cap(node: NodeInfo, n: int) -> int:
    return n if node.max_processes is None else min(node.max_processes, n)


@pytest.mark.slow
@given(situations())
@settings(max_examples=400, deadline=None)
def test_invariants(situation: tuple[list[str], list[NodeInfo], dict[str, str]]) -> None:
    processes, nodes, owners = situation
    result = fair_share(processes, nodes, owners)
    live = {n.node_id: n for n in nodes if not n.stopping}  # a stopping node gets nothing
    n = len(processes)
    got = counts(result)

    # only known processes, only live nodes; a dict: at most one owner per process
    assert set(result) <= set(processes)
    assert set(result.values()) <= set(live)
    # caps respected, and everything fits that can: the rest stays unowned
    for node_id, node in live.items():
        assert got[node_id] <= cap(node, n)
    capacity = sum(cap(node, n) for node in live.values())
    assert len(result) == min(n, capacity)
    # fair: two shares differ by more than one only when the smaller one is at its cap
    for a in live:
        for b in live:
            if got[a] > got[b] + 1:
                assert got[b] == cap(live[b], n), (a, b, got)
    # a process whose owner is live and within its share never moves
    held = Counter(owners[p] for p in processes if owners.get(p) in live)
    for node_id in live:
        kept = sum(1 for p in processes if owners.get(p) == node_id and result.get(p) == node_id)
        assert kept == min(held[node_id], got[node_id]), node_id
    # fewest moves: handing the extra process to another node would not move fewer
    def moves(share: Counter[str]) -> int:
        return sum(max(0, held[x] - share[x]) for x in live)
    for a in live:
        for b in live:
            if got[a] == got[b] + 1 and got[b] + 1 <= cap(live[b], n):
                swapped = got.copy()
                swapped[a] -= 1
                swapped[b] += 1
                assert moves(swapped) >= moves(got)


@pytest.mark.slow
@given(situations(), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_deterministic_and_stable(situation: tuple[list[str], list[NodeInfo], dict[str, str]],
                                  rnd: random.Random) -> None:
    processes, nodes, owners = situation
    result = fair_share(processes, nodes, owners)
    shuffled_p, shuffled_n = processes[:], nodes[:]
    rnd.shuffle(shuffled_p)
    rnd.shuffle(shuffled_n)
    # every node computes the same answer, whatever order it read things in
    assert fair_share(shuffled_p, shuffled_n, dict(reversed(owners.items()))) == result
    # once applied, nothing moves again
    assert fair_share(processes, nodes, result) == result


def test_two_nodes_split_six_three_and_three() -> None:
    procs = [f"p{i}" for i in range(6)]
    result = fair_share(procs, [NodeInfo("a"), NodeInfo("b")], {})
    assert counts(result) == {"a": 3, "b": 3}


def test_a_third_node_joining_moves_only_two() -> None:
    procs = [f"p{i}" for i in range(6)]
    before = fair_share(procs, [NodeInfo("a"), NodeInfo("b")], {})
    after = fair_share(procs, [NodeInfo("a"), NodeInfo("b"), NodeInfo("c")], before)
    assert counts(after) == {"a": 2, "b": 2, "c": 2}
    assert sum(1 for p in procs if before[p] != after[p]) == 2


def test_a_node_leaving_moves_only_its_own() -> None:
    procs = [f"p{i}" for i in range(9)]
    before = fair_share(procs, [NodeInfo("a"), NodeInfo("b"), NodeInfo("c")], {})
    after = fair_share(procs, [NodeInfo("a"), NodeInfo("c")], before)
    moved = {p for p in procs if before[p] != after[p]}
    assert moved == {p for p in procs if before[p] == "b"}
    assert sorted(counts(after).values()) == [4, 5]


def test_caps_leave_the_rest_unowned_and_stopping_nodes_get_nothing() -> None:
    procs = [f"p{i}" for i in range(10)]
    nodes = [NodeInfo("a", max_processes=2), NodeInfo("b", max_processes=3),
             NodeInfo("c", stopping=True)]
    result = fair_share(procs, nodes, {"p0": "c", "p1": "c"})
    assert counts(result) == {"a": 2, "b": 3}
    assert len(result) == 5


def test_the_extra_process_stays_with_the_node_that_has_it() -> None:
    procs = [f"p{i}" for i in range(7)]
    owners = {p: "a" for p in procs[:4]} | {p: "b" for p in procs[4:]}
    result = fair_share(procs, [NodeInfo("a"), NodeInfo("b")], owners)
    assert result == owners  # 4/3 is already fair: nothing moves
    joined = fair_share(procs, [NodeInfo("a"), NodeInfo("b"), NodeInfo("c")], owners)
    assert counts(joined) == {"a": 3, "b": 2, "c": 2}  # a keeps the extra one: 2 moves


def test_nothing_to_share() -> None:
    assert fair_share([], [NodeInfo("a")], {}) == {}
    assert fair_share(["p"], [], {"p": "a"}) == {}
