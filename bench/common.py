"""What several benches share (a bench's own helpers live in its package), most of it
about the sandbox:

- a sandbox brought up as a user brings it up: `airlock sandbox up` with a state directory
  of the benchmark's own, read back from its state file, and `down` afterwards;
- the resident memory and CPU time of its processes, from /proc;
- the workloads people run (DaemonSets, Deployments, Jobs), made by the real
  kube-controller-manager;
- a clock on pods: when the watch first showed each one, without its gate, on a node,
  Running, and gone;
- the samples of a Prometheus text exposition (the apiserver's /metrics, the webhook's):
  histograms by series and their quantiles;
- the percentiles of the timings benches print.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.builders import policy_yaml, template, workload
from tests.kube import events
from webhook.keys import GATE
from webhook.kubewatch import watch
from webhook.policy.loading import policy_files
from webhook.simulation.traces import Job

POLICIES = Path(__file__).resolve().parents[1] / "policies"
GPU = "nvidia.com/gpu"
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Sandbox:
    state_dir: Path
    kubeconfig: Path
    pids: dict[str, int]  # process name (as `airlock sandbox status` shows it) -> pid
    up_seconds: float  # wall time of `airlock sandbox up`, Python's start included
    logs: dict[str, Path] = field(default_factory=dict)  # process name -> its log
    # Process name -> the URL that answers once it serves (Airlock's: its /healthz).
    ready: dict[str, str] = field(default_factory=dict)

    def _proc(self, name: str, entry: str) -> str:
        return Path(f"/proc/{self.pids[name]}/{entry}").read_text()

    def memory_mib(self, name: str) -> tuple[float, float]:
        """The process's resident memory now, and its high-water mark."""
        fields = dict(line.split(":", 1) for line in self._proc(name, "status").splitlines()
                      if ":" in line)
        return (int(fields["VmRSS"].split()[0]) / 1024,
                int(fields["VmHWM"].split()[0]) / 1024)

    def cpu_seconds(self, name: str) -> float:
        return cpu_seconds(self.pids[name])

    def cpu_all(self) -> dict[str, float]:
        return {name: self.cpu_seconds(name) for name in self.pids}


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used (proc(5): utime and stime are
    fields 14 and 15; counted after the command name, which may hold spaces)."""
    after = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(after[11]) + int(after[12])) / _TICKS


def load() -> str:
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def sandbox(state_dir: Path, nodes: int, policies: Path = POLICIES,
            extra: tuple[str, ...] = ()) -> Iterator[Sandbox]:
    """`airlock sandbox up --nodes N` (and `extra` flags) in `state_dir`; `down` on the
    way out, whatever happened. Its progress lines go to stderr, as they do for a
    person."""
    airlock = [sys.executable, "-m", "webhook", "sandbox"]
    where = ["--state-dir", str(state_dir)]
    started = time.monotonic()
    try:
        up = subprocess.run([*airlock, "up", *where, "--nodes", str(nodes),
                             "--policies", str(policies), *extra],
                            stdout=subprocess.DEVNULL, check=False)
        if up.returncode != 0:
            raise RuntimeError(f"airlock sandbox up --nodes {nodes} failed (exit "
                               f"{up.returncode}); its message is above")
        seconds = time.monotonic() - started
        state = json.loads((state_dir / "state.json").read_text())
        processes = state["processes"]
        yield Sandbox(state_dir, Path(state["kubeconfig"]),
                      {p["name"]: int(p["pid"]) for p in processes}, seconds,
                      {p["name"]: Path(p["log"]) for p in processes},
                      {p["name"]: p["ready"] for p in processes if p.get("ready")})
    finally:
        subprocess.run([*airlock, "down", *where], stdout=subprocess.DEVNULL, check=False)


def policies_with(directory: Path, name: str, text: str, source: Path = POLICIES) -> Path:
    """A copy of `source` (policies/) in `directory`, with one more file: what a
    benchmark changes."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in policy_files(source):
        shutil.copy(f, directory / f.name)
    (directory / name).write_text(text)
    return directory


def trace_grants(jobs: Iterable[Job]) -> str:
    """A policy file that grants each namespace of a trace the classes its jobs ask for
    (by label): the platform a trace stands for lets its teams run what they run."""
    by_class: dict[str, set[str]] = {}
    for job in jobs:
        by_class.setdefault(job.cls, set()).add(job.namespace)
    return policy_yaml("trace-grants", {"grants": [
        {"class": cls, "namespaces": sorted(namespaces)}
        for cls, namespaces in sorted(by_class.items())]})


# --- workloads, as people write them ----------------------------------------------------

def pod_template(app: str, *, image: str = "ghcr.io/acme/agent:1.0", gpus: int = 0,
                 cpu: str = "100m", memory: str = "128Mi", grace: int | None = None,
                 tolerate_all: bool = False) -> dict[str, Any]:
    """A pod template with requests: `gpus` whole GPUs (Airlock then classifies and
    places it) or none (Airlock leaves it alone). A node agent tolerates every taint, as
    node exporters and device plugins do."""
    spec: dict[str, Any] = {}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if tolerate_all:
        spec["tolerations"] = [{"operator": "Exists"}]
    out = template(image, gpus, {"app": app}, **spec)
    out["spec"]["containers"][0].setdefault("resources", {})["requests"] = {
        "cpu": cpu, "memory": memory, **({GPU: str(gpus)} if gpus else {})}
    return out


def daemon_set(name: str, ns: str, pod: dict[str, Any]) -> dict[str, Any]:
    return workload("apps/v1", "DaemonSet", name, ns,
                    selector={"matchLabels": {"app": name}}, template=pod)


def deployment(name: str, ns: str, replicas: int, pod: dict[str, Any]) -> dict[str, Any]:
    return workload("apps/v1", "Deployment", name, ns, replicas=replicas,
                    selector={"matchLabels": {"app": name}}, template=pod)


def job(name: str, ns: str, pods: int, pod: dict[str, Any]) -> dict[str, Any]:
    """A Job of `pods` pods running at once; none completes (no KWOK run time), so
    they run until deleted, like a long batch sweep."""
    pod = {**pod, "spec": {**pod["spec"], "restartPolicy": "Never"}}
    return workload("batch/v1", "Job", name, ns, parallelism=pods, completions=pods,
                    backoffLimit=pods, template=pod)


async def create(api: client.ApiClient, obj: dict[str, Any]) -> None:
    ns, kind = obj["metadata"]["namespace"], obj["kind"]
    if kind == "Job":
        await client.BatchV1Api(api).create_namespaced_job(ns, body=obj)
    elif kind == "Deployment":
        await client.AppsV1Api(api).create_namespaced_deployment(ns, body=obj)
    else:
        await client.AppsV1Api(api).create_namespaced_daemon_set(ns, body=obj)


# --- a clock on pods --------------------------------------------------------------------

@dataclass
class Moments:
    """When the watch showed a pod first, without Airlock's gate, on a node, Running,
    marked for deletion and gone (monotonic seconds); and the pod as last seen."""

    seen: float
    obj: dict[str, Any]
    ungated: float | None = None
    bound: float | None = None
    running: float | None = None
    deleting: float | None = None  # marked for deletion; `gone` once the object is
    gone: float | None = None
    # When each annotation key was first seen on it (the controller's records).
    annotated: dict[str, float] = field(default_factory=dict)

    def gpus(self) -> int:
        return sum(int((c.get("resources") or {}).get("requests", {}).get(GPU, 0))
                   for c in self.obj["spec"]["containers"])


@dataclass
class PodClock:
    """Pods timed from the watch as its events arrive: those of one namespace, or of all
    (one stream keeps the apiserver's order between namespaces). Keyed `namespace/name`."""

    api: client.ApiClient
    namespace: str | None = None
    pods: dict[str, Moments] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    last_change: float = 0.0

    @staticmethod
    def key(obj: dict[str, Any]) -> str:
        return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"

    def _see(self, obj: dict[str, Any], now: float) -> None:
        key = self.key(obj)
        m = self.pods.get(key)
        if m is None or m.gone is not None:  # a new pod of a reused name starts afresh
            m = self.pods[key] = Moments(now, obj)
        m.obj = obj
        spec, status = obj["spec"], obj.get("status") or {}
        if m.ungated is None and not any(g["name"] == GATE
                                         for g in spec.get("schedulingGates") or []):
            m.ungated = now
        if m.bound is None and spec.get("nodeName"):
            m.bound = now
        if m.running is None and status.get("phase") == "Running":
            m.running = now
        if m.deleting is None and obj["metadata"].get("deletionTimestamp"):
            m.deleting = now
        for key in obj["metadata"].get("annotations") or {}:
            m.annotated.setdefault(key, now)

    def _listed(self, items: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        listed = {self.key(o) for o in items}
        for key, m in self.pods.items():  # gone while the watch was being renewed
            if key not in listed and m.gone is None:
                m.gone = now
        for obj in items:
            self._see(obj, now)
        self._changed(now)

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        if kind == "DELETED":
            m = self.pods.get(self.key(obj))
            if m is not None and m.gone is None:
                m.gone = now
        else:
            self._see(obj, now)
        self._changed(now)

    def _changed(self, now: float) -> None:
        self.last_change = now
        self.changed.set()

    def alive(self, namespace: str) -> list[Moments]:
        return [m for key, m in self.pods.items()
                if m.gone is None and key.startswith(f"{namespace}/")]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[PodClock]:
        core = client.CoreV1Api(self.api)
        lister = (functools.partial(core.list_namespaced_pod, self.namespace)
                  if self.namespace else core.list_pod_for_all_namespaces)
        ready = asyncio.Event()
        task = asyncio.create_task(watch("pods", lister, lambda o: o, self._listed,
                                         self._event, ready))
        await ready.wait()
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def until(self, check: Callable[[], bool], within: float, what: str) -> None:
        """Until `check()` holds, looked at after every event (and each second, for checks
        that depend on time)."""
        deadline = time.monotonic() + within
        while not check():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{what}: not after {within:g}s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))

    async def gang_running(self, namespace: str, gang: str, size: int, within: float
                           ) -> list[Moments]:
        """The moments of the gang's members `gang-0`..., once all run; on a timeout,
        an error with the gang's events, which say why it waits."""
        members = [f"{namespace}/{gang}-{i}" for i in range(size)]

        def running() -> bool:
            return all(m in self.pods and self.pods[m].running for m in members)

        try:
            await self.until(running, within, f"gang {gang} Running")
        except TimeoutError as e:
            told = "\n".join(await events(self.api, namespace, gang))
            raise RuntimeError(f"{e}; its events:\n{told}") from None
        return [self.pods[m] for m in members]


# --- Prometheus text: the apiserver's /metrics, the webhook's ------------------------------

WEBHOOK_LATENCY = "apiserver_admission_webhook_admission_duration_seconds"
# A histogram's buckets, (upper bound, cumulative count), ascending; the last is +Inf.
Buckets = list[tuple[float, float]]


def samples(text: str, metric: str) -> Iterator[tuple[dict[str, str], float]]:
    """Each sample of `metric` (the whole name: `x_bucket` for a histogram's buckets), with
    its labels."""
    pattern = re.compile(rf"^{re.escape(metric)}(?:\{{(?P<labels>[^}}]*)\}})? (?P<value>\S+)",
                         re.MULTILINE)
    for m in pattern.finditer(text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group("labels") or ""))
        yield labels, float(m.group("value"))


def webhook_call(labels: dict[str, str]) -> str | None:
    """The apiserver's series of one webhook, type and operation; None for the calls the
    webhook rejected, whose time is not what a pod waits for."""
    if labels.get("rejected") == "true":
        return None
    return f"{labels.get('name')} ({labels.get('type')}, {labels.get('operation')})"


def histograms(text: str, metric: str = WEBHOOK_LATENCY,
               series: Callable[[dict[str, str]], str | None] = webhook_call
               ) -> dict[str, Buckets]:
    """The buckets of `metric` by series (`series` names it from the labels; None skips)."""
    out: dict[str, Buckets] = {}
    for labels, value in samples(text, metric + "_bucket"):
        key = series(labels)
        if key is None:
            continue
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        out.setdefault(key, []).append((le, value))
    return {k: sorted(v) for k, v in out.items()}


def quantile(buckets: Buckets, q: float) -> float:
    """Prometheus-style linear interpolation within the bucket that holds quantile q."""
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / max(
                count - lower_count, 1e-9)
        lower_bound, lower_count = bound, count
    return lower_bound
