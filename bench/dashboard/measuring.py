"""What the controller's dashboard costs it: one state (`dashboarding.state_of`: a copy
of the cache, `airlock status`'s report over it, the cluster map, and its JSON) on a
cluster the size of the controller bench's, 5,000 nodes and 50,000 pods (9 CPU agents a
node, 4 in 10 nodes held by 8-GPU pods of running gangs of 4, and waiting gangs), and
how often `Recent` will compute one (at most a tenth of a core)."""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench.common import load
from bench.controller.measuring import ready_nodes
from tests.builders import pod, raw_member
from tests.paths import POLICIES
from webhook.controller.core.records import Unverified
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.cache import Cache
from webhook.controller.shells.dashboarding import FRESH_FOR, REST_PER_COMPUTE, state_of
from webhook.policy.loading import load_policy
from webhook.policy.model import Policy

AGENTS = 9


def _cache(policy: Policy, nodes: int, waiting: int) -> tuple[Cache, int]:
    cache = Cache(policy.counted(), Unverified(), policy.device_kinds)
    listed = ready_nodes(nodes)
    cache.list_nodes(listed)
    raw = []
    names = [n.name for n in listed]
    for i, name in enumerate(names):
        raw += [pod(f"agent-{i}-{a}", "agents").cpu("100m", "128Mi").set("nodeName", name)
                .build() for a in range(AGENTS)]
    held = names[: len(names) * 4 // 10]
    for g in range(0, len(held), 4):
        for i, name in enumerate(held[g:g + 4]):
            member = raw_member(f"run{g}", i, 8, 4, gated=False, ns=f"team-{g % 20}",
                                node_name=name)
            member["status"] = {"phase": "Running", "startTime": "2026-11-29T00:00:00Z"}
            raw.append(member)
    for g in range(waiting):
        raw += [raw_member(f"wait{g}", i, 8, 8, ns=f"team-{g % 20}") for i in range(8)]
    cache.list_pods([cache.parse_pod(p) for p in raw])
    return cache, len(raw)


def measure(nodes: int, waiting: int, turns: int) -> None:
    policy = load_policy(POLICIES)
    cache, pods = _cache(policy, nodes, waiting)
    rounds = Rounds()
    times, sizes, encode = [], [], []
    for _ in range(turns):
        started = time.process_time()
        state = state_of(policy, cache, rounds.accounts, policy.counted(), time.time())()
        computed = time.process_time()
        body = json.dumps(state, separators=(",", ":")).encode()
        times.append(time.process_time() - started)
        encode.append(time.process_time() - computed)
        sizes.append(len(body))
    median = statistics.median(times)
    print(f"{nodes:,} nodes, {pods:,} pods, {waiting} waiting gangs of 8 ({load()}):")
    print(f"  one state, CPU p50 {median:.2f} s, max {max(times):.2f} s "
          f"(of which JSON {statistics.median(encode):.2f} s); {sizes[0] / 1e6:.1f} MB")
    print(f"  computed at most every {max(FRESH_FOR, REST_PER_COMPUTE * median):.1f} s "
          f"whoever polls")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--waiting", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    measure(args.nodes, args.waiting, args.turns)
    return 0
