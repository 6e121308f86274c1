"""Work done off the event loop in a forked child (the forecast's): in another process,
on the state as it was at the fork whatever the loop changes after, and what went wrong
said rather than raised."""

from __future__ import annotations

import asyncio
import os
import time

from webhook.controller.shells.forking import Done, Failed, in_child


def test_the_work_runs_in_a_child_on_the_state_at_the_fork() -> None:
    async def changed_after_the_fork() -> Done[tuple[int, int]] | Failed:
        state = {"version": 1}
        task = in_child(lambda: (os.getpid(), state["version"]), limit=120)
        state["version"] = 2
        return await task

    answer = asyncio.run(changed_after_the_fork())
    assert isinstance(answer, Done)
    assert answer.value[0] != os.getpid()
    assert answer.value[1] == 1


def _fails() -> int:
    raise ValueError("no such unit")


def test_a_failure_is_said() -> None:
    async def failed() -> Done[int] | Failed:
        return await in_child(_fails, limit=120)

    assert asyncio.run(failed()) == Failed("ValueError: no such unit")


def test_a_child_past_its_limit_is_killed() -> None:
    async def stuck() -> Done[None] | Failed:
        return await in_child(lambda: time.sleep(3600), limit=0.5)

    assert asyncio.run(stuck()) == Failed("took more than 0.5 s")
