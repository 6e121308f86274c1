"""Pure work too long for the event loop, done in a forked child on the state as it was
when the child was forked (the forecast: docs/predictions.md).

Why a fork, not a thread or slices of the work:
- A thread shares the GIL: pure Python work there holds it for most of each switch
  interval, so every round, watch event and /healthz on the loop is slowed as long as it
  runs; and it would read the tracked cluster while the watches change it, so it would
  need a copy first (of 50,000 pods, on the loop).
- Slices that yield to the loop have the same problem of a cluster that changes between
  them, and each slice must still be bounded.
- A fork copies nothing up front: the child sees memory as it was at the fork (pages are
  copied only as either side writes them), runs on another core, and sends back only
  its result. The loop pays the fork and the reading of the result.

The child runs only the pure work it is given and leaves with `os._exit` (no logging, no
I/O but its pipe: a lock another thread held at the fork stays held in the child). It is
killed when it takes longer than its limit, or when its waiter is cancelled.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Final, Generic, TypeVar

T = TypeVar("T")

_FORK: Final = multiprocessing.get_context("fork")


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """What the child found, and the CPU seconds it spent on it."""

    value: T
    seconds: float


@dataclass(frozen=True, slots=True)
class Failed:
    """The child's work raised, or the child died or ran past its limit: why."""

    why: str


def _serve(work: Callable[[], T], out: Connection) -> None:
    # The parent's loop handles its signals through a wakeup fd the child shares: a
    # signal to the child must not reach the parent's handlers that way.
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    started = time.process_time()
    try:
        value = work()
    except Exception as e:  # sent back to be logged by the parent, which can log
        out.send(Failed(f"{type(e).__name__}: {e}"))
        return
    out.send(Done(value, time.process_time() - started))


def in_child(work: Callable[[], T], limit: float) -> asyncio.Task[Done[T] | Failed]:
    """`work` done in a child forked now, before this returns (so it sees the state as
    it is now, whatever the loop changes after); the task ends with what it found, or
    why not. Called from a running event loop."""
    reader, writer = _FORK.Pipe(duplex=False)
    child = _FORK.Process(target=_serve, args=(work, writer), daemon=True)
    child.start()
    writer.close()
    return asyncio.get_running_loop().create_task(_collect(child, reader, limit))


def _settle(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)


async def _collect(child: BaseProcess, reader: Connection, limit: float
                   ) -> Done[T] | Failed:
    """Waits on the loop (not in a thread) until the child's answer can be read."""
    loop = asyncio.get_running_loop()
    readable = loop.create_future()
    loop.add_reader(reader.fileno(), _settle, readable)
    try:
        await asyncio.wait_for(readable, limit)
        answer: Done[T] | Failed = reader.recv()
        return answer
    except TimeoutError:
        return Failed(f"took more than {limit:g} s")
    except EOFError:
        return Failed("the child died before it answered")
    finally:
        loop.remove_reader(reader.fileno())
        reader.close()
        child.kill()
        child.join()
