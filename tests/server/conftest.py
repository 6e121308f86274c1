"""Fixtures of the server level: the webhook's real aiohttp server over real TLS on
loopback (tests/servers.py), and a client session that trusts its CA."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.servers import MountedServer


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[MountedServer]:
    mounted = MountedServer.make(tmp_path, reload_interval=0.1)
    listening = await mounted.listen()
    try:
        yield mounted
    finally:
        await listening.close()


@pytest.fixture
async def session(running: MountedServer) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=running.client_context())
    async with aiohttp.ClientSession(connector=connector) as s:
        yield s
