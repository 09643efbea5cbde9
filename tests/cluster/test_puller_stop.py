"""InboxPuller.stop() ends the puller even when a claim in flight swallows the cancel (as a
database library may when a query and the cancel meet): the request still counts, so the
puller ends at its next turn instead of polling forever while stop() waits for it."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime_core.cluster.inbox import ClusterInbox, InboxItem
from runtime_core.cluster.puller import InboxListener, InboxPuller
from tests.helpers.polling import wait_for

DSN = "postgresql://nobody@127.0.0.1:1/none"  # never connected to: claim is replaced


class SwallowingInbox(ClusterInbox):
    """An inbox whose claim waits, and returns nothing when first cancelled (that cancel
    lost); a later cancel ends it, so a failing test still ends."""

    def __init__(self) -> None:
        super().__init__(DSN)
        self.claims = 0
        self.swallowed = 0
        self.in_claim = asyncio.Event()

    async def claim(self, process: str, limit: int, accept: Any, *,
                    fence: tuple[str, int] | None = None) -> list[InboxItem]:
        self.claims += 1
        self.in_claim.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if self.swallowed:
                raise
            self.swallowed += 1
            return []  # swallowed: the caller never sees it
        return []


async def accept(event: Any) -> bool:
    return True


async def test_a_cancel_swallowed_by_a_claim_still_ends_the_puller() -> None:
    inbox = SwallowingInbox()
    quiet = InboxListener(DSN)  # never started: nothing wakes the puller but its poll
    puller = InboxPuller(inbox, "p", accept, None, poll_s=0.05, listener=quiet)
    await puller.start()
    await wait_for(inbox.in_claim.is_set, 5, "the first claim")
    stopping = asyncio.ensure_future(puller.stop())
    await asyncio.wait({stopping}, timeout=5)  # wait_for would cancel it
    try:
        assert stopping.done(), "stop() waited for a puller that went on polling"
        assert inbox.swallowed == 1 and not puller.running
        assert inbox.claims == 1  # it ended instead of claiming again
    finally:
        task = next((t for t in asyncio.all_tasks()
                                     if t.get_name().startswith("cluster-inbox-puller")), None)
        if task is not None:
            task.cancel()  # a second cancel: the claim lets this one through
        await asyncio.wait({stopping}, timeout=5)
