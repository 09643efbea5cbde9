"""A node's state by its last beat (live, stopping, stale, gone), the aging settings, and the
delivery gate's lock keys; no database."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runtime_core.cluster import NodeInfo
from runtime_core.cluster.delivery_gate import delivery_lock_key
from runtime_core.cluster.nodes import NodeAging, node_state


@pytest.mark.parametrize(("age", "stopping", "state"), [
    (0.0, False, "live"), (1.99, False, "live"), (2.0, False, "stale"), (8.0, False, "stale"),
    (8.01, False, "gone"), (0.5, True, "stopping"), (8.01, True, "gone")])
def test_a_nodes_state_follows_its_last_beat(age: float, stopping: bool, state: str) -> None:
    gone_after = NodeAging().gone_after_s(2.0)  # the TTL and three TTLs of grace
    assert gone_after == 8.0
    assert node_state(NodeInfo("n", stopping=stopping, heartbeat_age_s=age), 2.0,
                      gone_after) == state


def test_the_aging_settings_are_checked() -> None:
    assert NodeAging(grace_s=5).gone_after_s(10) == 15
    assert NodeAging().prune_after_s == 3600
    with pytest.raises(ValidationError):
        NodeAging(grace_s=0)
    with pytest.raises(ValidationError):
        NodeAging(prune_after_s=-1)


def test_a_delivery_key_locks_the_same_on_every_node() -> None:
    key = delivery_lock_key("p0", "/hooks/p0#abc")
    assert key == (-520230348, 1658021581)  # not Python's hash(): it differs per process
    assert key != delivery_lock_key("p1", "/hooks/p0#abc")
    assert all(-2**31 <= half < 2**31 for half in key)
