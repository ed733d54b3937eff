"""The whole host against hostile servers: real processes on loopback and over stdio
(tests/support/hostile_server.py), the real engine, journal and keyring.

Each attack ends its call with a clear error within its limit, the next call to a good
server (the lab) still works, and the host's memory stays bounded throughout: its
resident size is sampled while the attacks run (and its high-water mark read after).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.protocol.jsonrpc import MAX_MESSAGE_BYTES
from hostapp.store.journal import ServerConfig
from tests.support.faults import LabProcess
from tests.support.hostile_server import running_http_server, stdio_command
from tests.support.keyring_daemon import KeyringDaemon, private_keyring
from tests.support.waiting import DEADLINE

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")]

#: How much the host's resident memory may grow while it is attacked: four times the
#: largest message it accepts (a message is read into a buffer, then decoded). It is
#: measured from the process's size when the test starts: earlier tests of the session
#: (the soak's driver runs in this process) leave it larger or smaller.
RSS_GROWTH_LIMIT_BYTES = 4 * MAX_MESSAGE_BYTES

# (server, tool, what the error says, seconds the call may take, status)
ATTACKS = [
    ("hostile-http", "deep", "nested too deeply", 10, api.FAILED),
    ("hostile-http", "deep_json", "nested too deeply", 10, api.FAILED),
    ("hostile-http", "endless_line", f"larger than the limit: an SSE event grew past the limit of {MAX_MESSAGE_BYTES}",
     20, api.FAILED),
    ("hostile-http", "endless_event", f"larger than the limit: an SSE event grew past the limit of {MAX_MESSAGE_BYTES}",
     20, api.FAILED),
    ("hostile-http", "endless_json", f"larger than the limit of {MAX_MESSAGE_BYTES} bytes", 20, api.FAILED),
    ("hostile-http", "huge_json", f"larger than the limit of {MAX_MESSAGE_BYTES} bytes", 10, api.FAILED),
    # stdio: the deep line is refused and the answer after it is read
    ("hostile-stdio", "deep", "after the deep line", 10, api.COMPLETED),
    # a server that never answers: the operation's own deadline (3 s here) ends it
    ("hostile-stdio", "silent", "", 10, api.EXPIRED),
]


def rss_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


class RssSampler:
    """The process's resident size, sampled every few milliseconds on a thread of its own."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes("VmRSS"))
            time.sleep(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Listener:
    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyringDaemon]:
    with private_keyring(tmp_path_factory.mktemp("hostile-keyring")) as daemon:
        yield daemon


@pytest.fixture
def good_lab(tmp_path: Path) -> Iterator[LabProcess]:
    lab = LabProcess(tmp_path / "lab.sqlite3").start()
    yield lab
    lab.stop()


async def test_each_attack_ends_its_call_clearly_and_the_host_stays_usable_and_small(
        isolated_home, keyring, good_lab, capsys):
    # The high-water mark of this process so far is the earlier tests': start it afresh.
    Path("/proc/self/clear_refs").write_text("5")
    baseline = rss_bytes("VmRSS")
    command = stdio_command()
    figures: list[str] = []
    with running_http_server() as hostile_url, RssSampler() as sampler:
        engine = Engine(isolated_home, Listener())
        await asyncio.wait_for(engine.start(), 20)
        try:
            await engine.add_server(ServerConfig(name="hostile-http", transport="http", url=hostile_url))
            await engine.add_server(ServerConfig(name="hostile-stdio", transport="stdio",
                                                 command=command[0], args=command[1:]))
            await engine.add_server(ServerConfig(name="lab", transport="http", url=good_lab.url))
            for server in ("hostile-http", "hostile-stdio", "lab"):
                await engine.connected(server, timeout=DEADLINE)
            for server, tool, words, limit, status in ATTACKS:
                started = time.monotonic()
                op = await engine.start_call(server, tool, {}, deadline_s=3 if tool == "silent" else 600)
                final = await asyncio.wait_for(engine.wait_finished(op.id), limit)
                took = time.monotonic() - started
                said = f"{final.message} {final.error} {final.result}"
                assert final.status == status, (tool, final.status, said)
                assert words in said, (tool, said)
                figures.append(f"{server} {tool}: {final.status} in {took:.2f} s, "
                               f"RSS peak so far {sampler.peak / 2**20:.0f} MiB")
                good = await engine.start_call("lab", "sleep_with_progress", {"seconds": 0.05, "steps": 1})
                done = await asyncio.wait_for(engine.wait_finished(good.id), 30)
                assert done.status == api.COMPLETED, (tool, done.message, done.error)
        finally:
            await asyncio.wait_for(engine.stop(), 30)
    high_water = rss_bytes("VmHWM")
    with capsys.disabled():
        print("\n" + "\n".join(figures) + f"\nRSS: {baseline / 2**20:.0f} MiB at the start, sampled peak "
              f"{sampler.peak / 2**20:.0f} MiB, high-water mark {high_water / 2**20:.0f} MiB")
    grew = max(sampler.peak, high_water) - baseline
    assert grew < RSS_GROWTH_LIMIT_BYTES, (baseline, sampler.peak, high_water)
