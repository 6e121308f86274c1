"""`python -m bench.fuzz --controller [--objects 10000] [--seed 1] [--nodes 16] [--live 1000]
[--gangs 100] [-o json]`: one tenant's objects must never take Airlock down for everyone.

On `airlock sandbox up --nodes N` (the shipped policy, and a file of the bench's own: a
queue for the tenant's two namespaces that may borrow 16 GPUs, one that guarantees
another team 16, and the tenant's namespaces limited to training and scavenger, as
docs/security.md advises for tenants), user mallory, with Kubernetes' `edit` role in her
two namespaces, creates `--objects` hostile objects drawn by hypothesis from
tests/hostile.py (`attacking`): first `--gangs` gangs that never complete, kept to the
end, then pods and the workloads that make them (Deployments, ReplicaSets,
StatefulSets, DaemonSets, Jobs, CronJobs), budgets and claim templates, with huge,
negative, non-ASCII and exponent values under every Airlock key (Airlock's own marks
too, on pods the webhook never sees), foreign gates, nodeName, requests no node meets;
the newest `--live` kept, the older deleted as she goes. Meanwhile a canary gang of the
other team is created, admitted, deleted, again and again, each timed from when it fits
to its admission (`probing`).

It prints what was stored and refused (by whom), what the controller told her pods (the
reasons of their events), the most GPUs her pods held at once through Airlock (gated,
then let go), the canary's admissions (p50, p99, max), and what the controller says of
itself: its rounds that failed
(`airlock_rounds_failed` on its /metrics, read with a token bound to
airlock-metrics-reader), its watches that failed and were restarted (`watch failed;
retrying` in its log), the objects its watches passed over and the pods it could not read
(`airlock_watch_objects_passed_over`, `airlock_pods_unreadable`), and whether it still
runs. It exits 1 unless the target is met: `--objects` stored, no round failed, no watch
restarted, every canary admitted, p99 within 5 s, her queue's limit kept. The same seed
draws the same objects."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from bench.common import GPU, Sandbox, load, policies_with, samples, sandbox
from bench.fuzz.attacking import Attack, Counts
from bench.fuzz.probing import Canary, Room, Sample
from tests.builders import policy_yaml
from tests.kube import gated, grant_edit, pod_gpus, scrape
from webhook.kubewatch import watch
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig, service_account_token
from webhook.sandbox.launching import alive

TENANT, GANGS, TEAM = "fuzz-tenant", "fuzz-gangs", "fuzz-canary"
MALLORY = "mallory"
# The controller's name: the sandbox's for its process, its events' source.
AIRLOCK_CONTROLLER = "airlock-controller"
TARGET_P99 = 5.0
# What the tenant's queue may borrow: all it may hold.
TENANT_LIMIT = 16
SCRAPER = "fuzz-scraper"
# The controller's log lines the bench counts, and its metrics.
WATCH_FAILED, ROUND_FAILED = "watch failed; retrying", "round failed; retrying"
PASSED_OVER, UNREADABLE = "object cannot be read; passed over", \
    "pod cannot be read; set aside as invalid"
METRICS = {"rounds failed": "airlock_rounds_failed_total",
           "objects passed over": "airlock_watch_objects_passed_over",
           "pods unreadable": "airlock_pods_unreadable"}


def policy() -> str:
    """The bench's policy file, beside the shipped policy."""
    return policy_yaml("controller-fuzz", {
        "queues": [{"name": "fuzz-tenant", "namespaces": [TENANT, GANGS],
                    "nominal": {GPU: 0}, "borrowingLimit": {GPU: TENANT_LIMIT}},
                   {"name": "fuzz-team", "namespaces": [TEAM], "nominal": {GPU: 16}}],
        # Under the shipped policy any GPU Deployment is inference, unqueued: a tenant
        # could fill the cluster by right, and leave the canary nothing to fit into.
        "namespaceAccess": [{"namespaces": [TENANT, GANGS],
                             "classes": ["training", "scavenger"]}]})


@dataclass
class Controller:
    """What the controller said of itself over the run: its log and its /metrics."""

    alive: bool
    log: Counter[str] = field(default_factory=Counter)  # by message
    restarts: list[str] = field(default_factory=list)  # each watch failure: kind, error
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def read(cls, log: Path, since: int, metrics: str, alive: bool) -> Controller:
        out = cls(alive)
        with log.open("rb") as f:
            f.seek(since)
            for line in f:
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a traceback's lines, printed by a crash
                message = entry.get("msg", "")
                if message in (WATCH_FAILED, ROUND_FAILED, PASSED_OVER, UNREADABLE):
                    out.log[message] += 1
                if message == WATCH_FAILED:
                    out.restarts.append(f"{entry.get('kind')}: {entry.get('error')}")
        for name, metric in METRICS.items():
            out.metrics[name] = sum(v for _, v in samples(metrics, metric))
        return out


@dataclass
class TenantPods:
    """The tenant's pods as the watch shows them: those her workloads' controllers made,
    and the most GPUs those Airlock gated, then let go, held at once: never more than her
    queue's borrowing limit, whatever else she bound by nodeName."""

    made: set[str] = field(default_factory=set)
    gated: set[str] = field(default_factory=set)
    held: dict[str, int] = field(default_factory=dict)
    most: int = 0

    def see(self, kind: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        if meta["namespace"] not in (TENANT, GANGS):
            return
        uid = meta["uid"]
        if meta.get("ownerReferences"):
            self.made.add(uid)
        if gated(pod):
            self.gated.add(uid)
        self.held.pop(uid, None)
        if kind != "DELETED" and uid in self.gated and spec.get("nodeName") and \
                pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            self.held[uid] = pod_gpus(pod)
            self.most = max(self.most, sum(self.held.values()))


@dataclass
class Run:
    seconds: float
    counts: Counts
    tenant: TenantPods
    told: Counter[str]  # the reasons of the events on the tenant's pods
    canaries: list[Sample]
    controller: Controller
    objects: int

    def latencies(self) -> list[float]:
        return sorted(s.seconds for s in self.canaries if s.seconds is not None)

    def quantile(self, q: float) -> float | None:
        found = self.latencies()
        return found[max(0, math.ceil(q * len(found)) - 1)] if found else None

    @property
    def failed_canaries(self) -> list[Sample]:
        return [s for s in self.canaries if s.outcome != "admitted"]

    @property
    def met(self) -> bool:
        p99 = self.quantile(0.99)
        return (self.counts.stored >= self.objects and self.controller.alive
                and self.tenant.most <= TENANT_LIMIT
                and not self.controller.metrics["rounds failed"]
                and not self.controller.restarts and not self.failed_canaries
                and p99 is not None and p99 <= TARGET_P99)

    def figures(self) -> dict[str, Any]:
        c = self.counts
        return {
            "seconds": round(self.seconds), "loadAverage": os.getloadavg()[0],
            "hostileObjects": c.stored, "created": dict(c.created), "refused": dict(c.refused),
            "refusedExamples": c.examples, "deleted": c.deleted, "errors": dict(c.errors),
            "podsMadeByWorkloads": len(self.tenant.made),
            "tenantGpusThroughAirlockAtMost": self.tenant.most,
            "toldTheTenant": dict(self.told),
            "canary": {"admitted": len(self.latencies()),
                       "p50": self.quantile(0.5), "p99": self.quantile(0.99),
                       "max": self.latencies()[-1] if self.latencies() else None,
                       "waitedForRoom": sum(1 for s in self.canaries
                                            if s.fit is not None and s.fit > s.created),
                       "failed": [{"name": s.name, "outcome": s.outcome, "events": s.told}
                                  for s in self.failed_canaries]},
            "controller": {"alive": self.controller.alive, **self.controller.metrics,
                           "watchRestarts": len(self.controller.restarts),
                           "restarts": self.controller.restarts[:10],
                           "log": dict(self.controller.log)},
            "met": self.met}

    def text(self, seed: int) -> str:
        f = self.figures()
        canary, ctl, c = f["canary"], f["controller"], self.counts

        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f} s"

        lines = [f"controller fuzz, seed {seed}: {c.stored:,} hostile objects in "
                 f"{self.seconds:.0f} s; {load()}",
                 "stored: " + ", ".join(f"{k} {n:,}" for k, n in c.created.most_common()),
                 f"pods their workloads' controllers made: {len(self.tenant.made):,}; "
                 f"objects deleted as she went: {c.deleted:,}",
                 "the controller told her pods: " + ", ".join(
                     f"{k} {n:,}" for k, n in self.told.most_common()),
                 f"GPUs her pods held at once through Airlock: at most {self.tenant.most} "
                 f"(her queue's limit: {TENANT_LIMIT})",
                 "refused: " + (", ".join(f"{k} {n:,}" for k, n in c.refused.most_common())
                                or "none")]
        lines += [f"  e.g. {example}" for examples in c.examples.values()
                  for example in examples[:1]]
        if c.errors:
            lines.append("errors (not answers about the object): " + ", ".join(
                f"{k} {n:,}" for k, n in c.errors.most_common()))
        lines += [f"canary: {canary['admitted']:,} gangs admitted, from when each fit: "
                  f"p50 {seconds(canary['p50'])}, p99 {seconds(canary['p99'])}, max "
                  f"{seconds(canary['max'])}; {canary['waitedForRoom']:,} waited for room "
                  f"first; {len(canary['failed'])} failed"]
        lines += [f"  {s['name']}: {s['outcome']}; its events: {s['events'][-3:]}"
                  for s in canary["failed"][:5]]
        lines += [f"controller: {'running' if ctl['alive'] else 'EXITED'}; rounds failed "
                  f"{ctl['rounds failed']:.0f}; watch restarts {ctl['watchRestarts']}; "
                  f"objects passed over {ctl['objects passed over']:.0f}; pods unreadable "
                  f"{ctl['pods unreadable']:.0f}"]
        lines += [f"  watch restart: {r[:300]}" for r in ctl["restarts"][:5]]
        lines.append(f"target ({self.objects:,} objects, 0 rounds failed, 0 watch restarts, "
                     f"every canary admitted, p99 <= {TARGET_P99:g} s, her quota kept): "
                     f"{'met' if self.met else 'NOT MET'}")
        return "\n".join(lines) + "\n"


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _scraper_token(api: client.ApiClient) -> str:
    """A token that may read the controller's /metrics, as Prometheus's would."""
    await client.CoreV1Api(api).create_namespaced_service_account(
        TEAM, body={"metadata": {"name": SCRAPER}})
    await client.RbacAuthorizationV1Api(api).create_cluster_role_binding(body={
        "metadata": {"name": SCRAPER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "airlock-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": TEAM}]})
    return await service_account_token(api, TEAM, SCRAPER)


async def _metrics(url: str, token: str) -> str:
    """The controller's /metrics, once its reviewer lets the token in (RBAC takes a
    moment to reach the authorizer)."""
    deadline = time.monotonic() + 30
    while True:
        status, text = await scrape(url, token)
        if status == 200 or time.monotonic() > deadline:
            return text if status == 200 else ""
        await asyncio.sleep(0.5)


async def _told(api: client.ApiClient) -> Counter[str]:
    """The reasons of the controller's events on the tenant's pods."""
    told: Counter[str] = Counter()
    for ns in (TENANT, GANGS):
        listed = await (await client.CoreV1Api(api).list_namespaced_event(
            ns, _preload_content=False)).json()
        told.update(e["reason"] for e in listed["items"]
                    if (e.get("source") or {}).get("component") == AIRLOCK_CONTROLLER)
    return told


async def _nodes(api: client.ApiClient) -> dict[str, int]:
    listed = (await (await client.CoreV1Api(api).list_node(_preload_content=False)).json())
    return {n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, "0"))
            for n in listed["items"]}


async def _fuzz(box: Sandbox, args: argparse.Namespace) -> Run:
    controller = AIRLOCK_CONTROLLER
    metrics_url = box.ready[controller].removesuffix("/healthz") + "/metrics"
    async with await from_kubeconfig(box.kubeconfig) as api, \
            await from_kubeconfig(box.kubeconfig, impersonate=MALLORY) as as_mallory:
        for ns in (TENANT, GANGS, TEAM):
            await wiring.create_namespace(api, ns)
        for ns in (TENANT, GANGS):
            await grant_edit(api, ns, MALLORY)
        token = await _scraper_token(api)
        canary = Canary(api, TEAM, Room(await _nodes(api)))
        tenant = TenantPods()

        def seen(kind: str, pod: dict[str, Any]) -> None:
            tenant.see(kind, pod)
            canary.see(kind, pod, time.monotonic())

        def listed(pods: list[dict[str, Any]]) -> None:
            for pod in pods:
                seen("ADDED", pod)

        ready = asyncio.Event()
        watching = asyncio.create_task(watch(
            "pods", client.CoreV1Api(api).list_pod_for_all_namespaces, lambda p: p, listed,
            seen, ready))
        await ready.wait()
        log = box.logs[controller]
        since = log.stat().st_size
        began = time.monotonic()
        attack = Attack(as_mallory, TENANT, GANGS, args.objects, args.seed, args.live,
                        args.gangs, progress=_progress)
        stop = asyncio.Event()
        probing = asyncio.create_task(canary.run(stop))
        try:
            await attack.run()
            stop.set()
            await probing
        finally:
            probing.cancel()
            watching.cancel()
        seconds = time.monotonic() - began
        text = await _metrics(metrics_url, token)
        running = alive(box.pids[controller])
        return Run(seconds, attack.counts, tenant, await _told(api), canary.samples,
                   Controller.read(log, since, text, running), args.objects)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="airlock-controller-fuzz-") as tmp:
        policies = policies_with(Path(tmp) / "policies", "90-controller-fuzz.yaml", policy(),
                                 args.policies)
        with sandbox(Path(tmp) / "sandbox", args.nodes, policies) as box:
            _progress(f"sandbox up in {box.up_seconds:.0f} s")
            result = asyncio.run(_fuzz(box, args))
    if args.output == "json":
        print(json.dumps({"seed": args.seed, **result.figures()}))
    else:
        print(result.text(args.seed), end="")
    return 0 if result.met else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--controller", action="store_true",
                   help="fuzz the controller through the sandbox instead (" +
                   (__doc__ or "").split("\n\n")[0].split(": ", 1)[1].rstrip(".") + ")")
    p.add_argument("--objects", type=int, default=10_000,
                   help="--controller: hostile objects stored, in all")
    p.add_argument("--nodes", type=int, default=16, help="--controller: the sandbox's nodes")
    p.add_argument("--live", type=int, default=1_000,
                   help="--controller: the tenant's newest objects kept; older ones deleted")
    p.add_argument("--gangs", type=int, default=100,
                   help="--controller: gangs that never complete, kept to the end")

