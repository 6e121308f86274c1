"""Admission benchmark: the webhook next to a bare aiohttp + orjson endpoint, same TLS,
same realistic bodies, same machine, one run. Both servers are pinned to core 0 and wrk
to core 1, so the load generator is never the bottleneck; turns alternate between the two
so that a busy moment of a shared machine falls on both.

    .venv/bin/python -m bench.admission [--duration 10] [--connections 16] [--turns 3]

Targets: webhook throughput >= 70% of the bare endpoint's, webhook p99 <= 5 ms.

With `--instructions`, each server runs under callgrind instead and the bench prints the
instructions it executes per request: a figure other processes on the machine do not move.

    .venv/bin/python -m bench.admission --instructions --connections 4 \
        [--requests 1200] [--idle 20]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.admission.bodies import BODIES
from webhook.certificates import make_certs
from webhook.sandbox.launching import free_port

ROOT = Path(__file__).resolve().parents[2]
SERVER_CORE, LOAD_CORE = "0", "1"


@dataclass(frozen=True)
class Result:
    name: str
    mode: str
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    # The server's own CPU time per request: unlike req/s, it hardly moves when other
    # processes take turns on the core.
    cpu_us: float


def _wait_healthy(url: str, ca: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} not healthy after {timeout}s")


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"cannot read wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _wrk(url: str, bodies: list[Path], duration: int, connections: int,
         pause_ms: int = 0) -> tuple[float, float, float, int, int]:
    cmd = ["taskset", "-c", LOAD_CORE, "wrk", "-t1", f"-c{connections}", f"-d{duration}s",
           "--latency", "-s", str(Path(__file__).with_name("rotate.lua")), url, "--",
           *map(str, bodies), f"pause={pause_ms}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    count = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, p50, p99, int(errors.group(1)) if errors else 0, count


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


BARE, HOOK = "bare aiohttp+orjson", "airlock webhook"


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    port: int


@dataclass(frozen=True)
class Server:
    name: str
    pid: int
    url: str


@contextmanager
def _serving(command: Command, ca: Path, under: tuple[str, ...] = (),
             timeout: float = 60) -> Iterator[Server]:
    """The server running on the server core, `under` a tool (callgrind) if given, once
    healthy; `timeout` bounds both the start and the stop."""
    proc = subprocess.Popen(["taskset", "-c", SERVER_CORE, *under, *command.argv], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_healthy(f"https://127.0.0.1:{command.port}/healthz", ca, proc, timeout)
        yield Server(command.name, proc.pid, f"https://127.0.0.1:{command.port}/mutate")
    finally:
        proc.terminate()
        proc.wait(timeout=timeout)


def _measure(server: Server, mode: str, bodies: list[Path], duration: int, connections: int,
             pause_ms: int) -> Result:
    cpu = _cpu_seconds(server.pid)
    rps, p50, p99, errors, count = _wrk(server.url, bodies, duration, connections, pause_ms)
    cpu_us = (_cpu_seconds(server.pid) - cpu) / max(count, 1) * 1e6
    return Result(server.name, mode, rps, p50, p99, errors, cpu_us)


def _spread(values: list[float], fmt: str) -> str:
    return f"median {format(statistics.median(values), fmt)} " \
           f"(range {format(min(values), fmt)}-{format(max(values), fmt)})"


def _post(port: int, ca: Path, bodies: list[bytes], requests: int, connections: int) -> None:
    """`requests` reviews over `connections` keep-alive connections, opened here, so the
    TLS handshakes are counted too (about 9k instructions a request at 1,200 over 4)."""
    ctx = ssl.create_default_context(cafile=str(ca))

    def send(count: int) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=600)
        try:
            for i in range(count):
                conn.request("POST", "/mutate", body=bodies[i % len(bodies)],
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    raise SystemExit(f"unexpected HTTP status {response.status}")
        finally:
            conn.close()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(send, [requests // connections + (i < requests % connections)
                             for i in range(connections)]))


def _callgrind(command: str, pid: int) -> None:
    subprocess.run(["callgrind_control", command, str(pid)], check=True, capture_output=True)


def _total(part: Path) -> int:
    totals = re.search(r"^totals: (\d+)", part.read_text(), re.MULTILINE)
    if totals is None:
        raise SystemExit(f"no instruction total in {part}")
    return int(totals.group(1))


@dataclass(frozen=True)
class Count:
    per_request: float
    # The server's instructions a second while idle (the webhook polls its policy and
    # certificate files every 2 s); `per_request` leaves them out, because under callgrind
    # a request takes ~50 times as long, so clock-driven work would count ~50 times over.
    idle_per_second: float
    seconds: float


def _instructions(command: Command, ca: Path, bodies: list[bytes], requests: int,
                  connections: int, idle: float, out: Path) -> Count:
    """Instructions the server executes per request, by callgrind, counted only while the
    measured requests run (after a warm-up of as many): startup and imports are left out,
    and so is what the server does by the clock, measured for `idle` seconds after."""
    callgrind = ("valgrind", "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={out}")
    with _serving(command, ca, callgrind, timeout=600) as server:
        _post(command.port, ca, bodies, requests, connections)
        _callgrind("--instr=on", server.pid)
        start = time.monotonic()
        _post(command.port, ca, bodies, requests, connections)
        seconds = time.monotonic() - start
        _callgrind("--dump=requests", server.pid)  # a dump also zeroes the counts
        start = time.monotonic()
        time.sleep(idle)
        _callgrind("--dump=idle", server.pid)
        idle_seconds = time.monotonic() - start
        _callgrind("--instr=off", server.pid)
    idle_rate = _total(out.with_name(out.name + ".2")) / idle_seconds
    busy = _total(out.with_name(out.name + ".1"))
    return Count((busy - idle_rate * seconds) / requests, idle_rate, seconds)


def _commands(cert_dir: Path, policies: Path) -> tuple[Command, Command]:
    py, certs = sys.executable, str(cert_dir)
    bare_port, hook_port = free_port(), free_port()
    return (Command(BARE, [py, "-m", "bench.admission.echo_server", "--port", str(bare_port),
                           "--cert-dir", certs], bare_port),
            Command(HOOK, [py, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port",
                           str(hook_port), "--cert-dir", certs, "--policies", str(policies)],
                    hook_port))


def _count(commands: tuple[Command, Command], ca: Path, bodies: list[Path], requests: int,
           connections: int, idle: float, tmp: Path) -> None:
    payloads = [b.read_bytes() for b in bodies]
    counts = {c.name: _instructions(c, ca, payloads, requests, connections, idle,
                                    tmp / f"callgrind.{c.port}") for c in commands}
    print(f"\ninstructions per request (callgrind), {requests} requests over {connections} "
          f"connections, bodies: {', '.join(BODIES)}\n")
    for name, count in counts.items():
        print(f"{name:<22}{count.per_request / 1000:>9.0f}k   (over {count.seconds:.1f} s, "
              f"less {count.idle_per_second / 1000:.0f}k a second idle)")
    print(f"\nbare/webhook: {counts[BARE].per_request / counts[HOOK].per_request:.1%}")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.admission",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--turns", type=int, default=3,
                        help="alternating rounds of bare and webhook runs")
    parser.add_argument("--policies", type=Path, default=ROOT / "policies")
    parser.add_argument("--pause-ms", type=int, default=10,
                        help="per-connection pause of the paced run")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per request under callgrind instead of wrk")
    parser.add_argument("--requests", type=int, default=1200,
                        help="measured requests per server with --instructions")
    parser.add_argument("--idle", type=float, default=20,
                        help="seconds of idle measured with --instructions")
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    package = "valgrind" if args.instructions else "wrk"
    tools = ("callgrind_control", "taskset") if args.instructions else ("taskset",)
    for tool in (package, *tools):
        if shutil.which(tool) is None:
            print(f"{tool} is missing: apt-get install {package} util-linux", file=sys.stderr)
            return 2
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        certs = make_certs(Path(tmp) / "certs")
        bodies = []
        for name, make in BODIES.items():
            path = Path(tmp) / f"{name}.json"
            path.write_bytes(make())
            bodies.append(path)
        commands = _commands(certs.cert.parent, args.policies)
        if args.instructions:
            _count(commands, certs.ca, bodies, args.requests, args.connections, args.idle,
                   Path(tmp))
            return 0
        bare_cmd, hook_cmd = commands
        with _serving(bare_cmd, certs.ca) as bare, _serving(hook_cmd, certs.ca) as hook:
            for server in (bare, hook):
                _wrk(server.url, bodies, 2, args.connections)  # warm-up
            for turn in range(args.turns):
                # Alternate which goes first, so neither always follows the other.
                for server in (bare, hook) if turn % 2 == 0 else (hook, bare):
                    for mode, pause in (("saturated", 0), (f"paced {args.pause_ms}ms",
                                                           args.pause_ms)):
                        results.append(_measure(server, mode, bodies, args.duration,
                                                args.connections, pause))
    _report(results, args)
    return 0


def _report(results: list[Result], args: argparse.Namespace) -> None:
    """The runs side by side, and the goals' medians over the turns."""
    print(f"\nadmission benchmark: {args.connections} connections, {args.duration}s, "
          f"{args.turns} turns, bodies: {', '.join(BODIES)}; servers on core {SERVER_CORE}, "
          f"wrk on core {LOAD_CORE}\n")
    print(f"{'endpoint':<22}{'load':<14}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}"
          f"{'cpu us/req':>12}")
    for r in results:
        print(f"{r.name:<22}{r.mode:<14}{r.rps:>9.0f}{r.p50_ms:>9.2f}{r.p99_ms:>9.2f}"
              f"{r.errors:>9}{r.cpu_us:>12.1f}")

    def runs(name: str, saturated: bool) -> list[Result]:
        return [r for r in results
                if r.name == name and (r.mode == "saturated") == saturated]

    ratios = [h.rps / b.rps for b, h in zip(runs(BARE, True), runs(HOOK, True),
                                            strict=True)]
    cpu_ratios = [b.cpu_us / h.cpu_us for b, h in zip(runs(BARE, True),
                                                      runs(HOOK, True), strict=True)]
    ratio = statistics.median(ratios)
    print(f"\nthroughput webhook/bare, saturated, per turn: {_spread(ratios, '.0%')} "
          f"(target >= 70%: {'met' if ratio >= 0.7 else 'MISSED'})")
    print(f"CPU time per request bare/webhook, saturated: {_spread(cpu_ratios, '.0%')}")
    for saturated, label in ((True, "saturated"), (False, f"paced {args.pause_ms}ms")):
        for name in (BARE, HOOK):
            p99 = [r.p99_ms for r in runs(name, saturated)]
            print(f"{name} p99, {label}: {_spread(p99, '.2f')} ms")
    paced = statistics.median([r.p99_ms for r in runs(HOOK, False)])
    print(f"webhook p99 at {args.connections} connections, paced: {paced:.2f} ms "
          f"(target <= 5 ms: {'met' if paced <= 5 else 'MISSED'})")
    print("Saturated is a closed loop: each of the connections sends as soon as it has its "
          "answer, so latency there is mostly queueing (connections / throughput); even the "
          "bare endpoint's p99 shows it. Paced is the apiserver's case: a steady load below "
          "capacity.")
