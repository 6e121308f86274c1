"""Carrying out decisions: the record first, then each pod narrowed and ungated (or, for
a preemption, each victim marked and deleted), then events. Every write returns the pod
as stored, which goes straight back into the cache, so the next round never decides from
a state older than our own writes."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, assert_never

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.actions import (
    Action,
    Admit,
    Event,
    EventReason,
    EventType,
    Finish,
    Ignore,
    Preempt,
    Replan,
    Requeue,
    Wait,
    events_of,
    retold,
    rfc3339,
)
from webhook.controller.core.identities import PodKey
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.records import Record, Seal
from webhook.controller.shells.leading import Fence, NotLeading
from webhook.controller.shells.patches import (
    annotation_patch,
    disruption_patch,
    notice_condition,
    record_patch,
    ungate_patch,
)
from webhook.keys import PREEMPTION_ANNOTATION, PREEMPTION_NOTICE_ANNOTATION
from webhook.kuberaw import json_of
from webhook.patchops import PatchOp

log = logging.getLogger("airlock.controller")
# The source component of the controller's events (`kubectl airlock why` reads them back).
EVENT_SOURCE = "airlock-controller"

Stored = Callable[[dict[str, Any]], None]
# Messages remembered per pod, so none is told twice while others come and go.
SAID = 4
# Writes in flight at once: enough to keep the apiserver busy across its round trips
# (measured: 16 reached 52% of its PATCH throughput, 64 reached 74%).
WRITES_IN_FLIGHT = 64


def eviction(pod: PodInfo) -> dict[str, Any]:
    """An Eviction of exactly this pod: the apiserver refuses it where a
    PodDisruptionBudget would be broken, and the uid keeps a namesake made since (a
    StatefulSet's) from going in its place."""
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"preconditions": {"uid": pod.uid}}}


def _said(e: ApiException) -> str:
    """What the apiserver said of a refusal (its Status's message), for the log."""
    try:
        status = json.loads(e.body or "")
    except (TypeError, ValueError):
        return ""
    return str(status.get("message", "")) if isinstance(status, dict) else ""


class Applier:
    def __init__(self, api: client.ApiClient, stored: Stored, identity: str, seal: Seal,
                 concurrency: int = WRITES_IN_FLIGHT, pause: float = 0.0,
                 fence: Fence | None = None) -> None:
        self.core = client.CoreV1Api(api)
        self.seal = seal
        self.fence = fence or Fence(None)
        self.stored = stored
        self.identity = identity
        self.limit = asyncio.Semaphore(concurrency)
        # Events trickle out behind the ungating (two at a time): they tell, gates decide,
        # and a burst of admissions should spend the apiserver's writes on the gates.
        self.event_limit = asyncio.Semaphore(2)
        self._telling: set[asyncio.Task[None]] = set()
        # Seconds to wait between pod patches: only for crash tests that need a lift to
        # take long enough to be interrupted half-way.
        self.pause = pause
        # What each pod was told lately, newest last: a pod told two things in turn (why
        # its record is ignored, and that it is preempted) is told each once.
        self._said: dict[PodKey, tuple[str, ...]] = {}
        # Uids of pods deleted, and when: the next rounds must not take them for running
        # before the watch says they are going.
        self.deleted: dict[str, float] = {}

    def recently_deleted(self, within: float = 60.0) -> frozenset[str]:
        now = time.monotonic()
        self.deleted = {u: t for u, t in self.deleted.items() if now - t < within}
        return frozenset(self.deleted)

    def forget_all_but(self, pods: Iterable[PodKey]) -> None:
        """Drop what was said to pods that are gone, so the memory of events stays the
        size of the cluster, not of its history."""
        alive = set(pods)
        self._said = {k: v for k, v in self._said.items() if k in alive}

    async def apply(self, actions: list[Action]) -> None:
        """Gangs are independent once decided: carry them out side by side (the semaphore
        bounds the writes in flight); within a gang, the record always comes first. The
        events follow in the background."""
        done = await asyncio.gather(*(self._apply(a) for a in actions))
        self.tell(e for a, ok in zip(actions, done, strict=True) if ok for e in events_of(a))

    def tell(self, events: Iterable[Event]) -> None:
        """Tell `events`, in the background."""
        task = asyncio.create_task(self._tell(list(events)))
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    async def _tell(self, events: list[Event]) -> None:
        await asyncio.gather(*(self._events(e) for e in events))

    async def _apply(self, action: Action) -> bool:
        try:
            match action:
                case Admit():
                    await self._nominate(action.ungate, action.nominate)
                    await self._record(action)
                    await self._ungate(tuple(p for p in action.ungate if p != action.anchor),
                                       action.record, action.annotations)
                case Finish():
                    await self._ungate(action.ungate, action.record)
                case Preempt():
                    await self._preempt(action)
                case Requeue():
                    (told,) = events_of(action)
                    await self._evict_all(action.pods, {p.key: told for p in action.pods})
                case Replan():
                    (told,) = events_of(action)
                    # Not marked as preempted, which it was not: the eviction's own
                    # DisruptionTarget condition stands.
                    await self._evict(action.pod, told, datetime.datetime.now(datetime.UTC),
                                      mark=False)
                case Wait():
                    # Nothing else to write: its event says why.
                    await self._nominate(action.unnominate,
                                         tuple((p.name, None) for p in action.unnominate))
                case Ignore():
                    pass  # nothing to write: its event says why
                case _:
                    assert_never(action)
            return True
        except ApiException as e:
            log.warning("could not apply a decision; the next round retries",
                        extra={"gang": str(action.unit), "status": e.status,
                               "reason": e.reason, "message": _said(e)})
            return False
        except NotLeading as e:
            log.error("decision not applied", extra={"gang": str(action.unit),
                                                     "reason": str(e)})
            return False

    async def _patch(self, pod: PodInfo, body: Any, content_type: str) -> None:
        async with self.limit:
            self.fence.check()  # right before the write: a lapsed leader writes nothing
            self.stored(await json_of(await self.core.patch_namespaced_pod(
                pod.name, pod.namespace, body=body, _content_type=content_type,
                _preload_content=False)))

    async def annotate(self, pod: PodInfo, ops: list[PatchOp]) -> None:
        """A JSON Patch of what the controller says on a pod, not a decision (the
        predicted start, `predicting`)."""
        await self._patch(pod, ops, "application/json-patch+json")

    async def _record(self, admit: Admit) -> None:
        anchor = admit.anchor
        ops = record_patch(anchor, admit.record, self.seal) + ungate_patch(
            anchor, admit.record, admit.annotations)
        await self._patch(anchor, ops, "application/json-patch+json")
        if self.pause:
            await asyncio.sleep(self.pause)
        # Where the plan sent each pod: what to compare with where it was bound.
        log.info("gang admitted", extra={"gang": str(admit.unit),
                                         "domain": admit.record.domain,
                                         "pods": len(admit.ungate),
                                         "nodes": dict(admit.record.nodes),
                                         "fencedOff": len(admit.record.fenced_off)})

    async def _nominate(self, gang: Iterable[PodInfo],
                        nodes: Iterable[tuple[str, str | None]]) -> None:
        """Pods of a gated `gang` get `nodes` as nominated (pod name, node; None to
        forget one)."""
        pods = {p.name: p for p in gang}

        async def one(name: str, node: str | None) -> None:
            pod = pods[name]
            async with self.limit:
                self.fence.check()
                self.stored(await json_of(await self.core.patch_namespaced_pod_status(
                    pod.name, pod.namespace, body={"status": {"nominatedNodeName": node}},
                    _content_type="application/strategic-merge-patch+json",
                    _preload_content=False)))
        await asyncio.gather(*(one(name, node) for name, node in nodes))

    async def _preempt(self, preempt: Preempt) -> None:
        """The decision goes on the preemptor's anchor first (unless it is there: a
        preemption resumed), so a leader that dies half-way leaves a record the next one
        finishes; then every victim is evicted, side by side."""
        anchor = preempt.anchor
        if anchor.recorded.preemption != preempt.record:
            await self._patch(anchor, annotation_patch(
                anchor, PREEMPTION_ANNOTATION, self.seal.dumps(preempt.record, anchor.uid)),
                "application/json-patch+json")
            if self.pause:
                await asyncio.sleep(self.pause)
        # Before the victims go, so no pod of kube-scheduler's takes the room they free.
        await self._nominate(preempt.preemptor, preempt.nominate)
        told = {p.key: e for e in events_of(preempt)
                if e.reason in ("Preempted", "PreemptionNotice") for p in e.pods}
        await asyncio.gather(self._evict_all([p for v in preempt.victims for p in v.pods], told),
                             self._notify(preempt, told))
        log.info("preempted", extra={"gang": str(preempt.unit),
                                     "domain": preempt.record.domain,
                                     "victims": [str(v.unit) for v in preempt.victims]})

    async def _notify(self, preempt: Preempt, told: Mapping[PodKey, Event]) -> None:
        """Tell each victim given time to checkpoint, once: the deadline on the pod, where
        the job reads it (a downward API volume), and a condition saying what to do."""
        until = preempt.notice_until
        if until is None:
            return
        now = datetime.datetime.now(datetime.UTC)

        async def one(pod: PodInfo) -> None:
            if pod.recorded.notice is not None and abs(pod.recorded.notice - until) < 1:
                return
            try:
                await self._patch(pod, annotation_patch(
                    pod, PREEMPTION_NOTICE_ANNOTATION, rfc3339(until)),
                    "application/json-patch+json")
                await self._status(pod, notice_condition(told[pod.key].message, now))
            except ApiException as e:
                if e.status != 404:  # gone before it could be told: nothing to evict
                    raise
        await self._each([p for v in preempt.noticed for p in v.pods], one)

    async def _evict_all(self, pods: Sequence[PodInfo],
                         told: Mapping[PodKey, Event]) -> None:
        now = datetime.datetime.now(datetime.UTC)
        await self._each(pods, lambda pod: self._evict(pod, told[pod.key], now))

    async def _evict(self, pod: PodInfo, told: Event, now: datetime.datetime,
                     mark: bool = True) -> None:
        """Evicted, then told and (with `mark`) marked with why, at once: not behind the
        round with the other events, so a controller killed right after still leaves it
        explained; and not before, since the apiserver may refuse (a PodDisruptionBudget),
        and then the next round tries again."""
        try:
            async with self.limit:
                self.fence.check()
                # Not stored: the pod as evicted could bring back one the watch has
                # already removed; the watch tells of the deletion.
                await json_of(await self.core.create_namespaced_pod_eviction(
                    pod.name, pod.namespace, body=eviction(pod), _preload_content=False))
                self.deleted[pod.uid] = time.monotonic()
        except ApiException as e:
            if e.status in (404, 409):  # gone already, or a namesake: what we wanted
                return
            raise
        await asyncio.gather(self._tell_eviction(pod, told.type, told.reason, told.message),
                             *([self._mark(pod, told.message, now)] if mark else []))

    async def _tell_eviction(self, pod: PodInfo, kind: EventType, reason: EventReason,
                             message: str) -> None:
        """An eviction's Event, under a name of its own (the pod's, the reason, the uid):
        told again by a leader that cannot know whether the last one told it, it is
        refused as already there rather than said twice."""
        self._saying(pod, message)
        await self._event(pod, kind, reason, message,
                          name=f"{pod.name[:220]}.{reason.lower()}.{pod.uid[:8]}")

    async def retell(self, pods: Collection[PodInfo]) -> None:
        """The Events of evictions under way that this leader did not make. A leader
        killed between an eviction and its Event leaves the victim saying why (its
        condition, `evicted_for`), or, killed before that too, named in the preemption
        record on its preemptor's anchor: the Event is told from one or the other (once,
        whoever told it first)."""
        recorded = {uid: retold(anchor, record) for anchor in pods
                    if (record := anchor.recorded.preemption) is not None for uid in record.uids}
        untold: list[tuple[PodInfo, str]] = []
        for pod in pods:
            message = pod.recorded.evicted_for or (recorded.get(pod.uid) if pod.deleting else None)
            if message and message not in self._said.get(pod.key, ()):
                untold.append((pod, message))
        await asyncio.gather(*(
            self._tell_eviction(p, "Warning", "Preempted" if message.startswith("Preempted:")
                                else "Requeued", message) for p, message in untold))

    def _saying(self, pod: PodInfo, message: str) -> None:
        """Remember the last messages told of a pod: not told again by this leader."""
        self._said[pod.key] = (*self._said.get(pod.key, ())[-(SAID - 1):], message)

    async def _mark(self, pod: PodInfo, message: str, now: datetime.datetime) -> None:
        try:
            await self._status(pod, disruption_patch(message, now))
        except ApiException as e:
            if e.status != 404:  # gone before it could be marked: the event says why
                raise

    async def _status(self, pod: PodInfo, body: dict[str, Any]) -> None:
        async with self.limit:
            self.fence.check()
            await json_of(await self.core.patch_namespaced_pod_status(
                pod.name, pod.namespace, body=body,
                _content_type="application/strategic-merge-patch+json",
                _preload_content=False))

    async def _ungate(self, pods: tuple[PodInfo, ...], record: Record,
                      annotations: tuple[tuple[str, str], ...] = ()) -> None:
        async def one(pod: PodInfo) -> None:
            try:
                await self._patch(pod, ungate_patch(pod, record, annotations),
                                  "application/json-patch+json")
            except ApiException as e:
                if e.status != 404:  # a pod deleted meanwhile needs no ungating
                    raise
        await self._each(pods, one)

    async def _each(self, pods: Iterable[PodInfo],
                    one: Callable[[PodInfo], Awaitable[None]]) -> None:
        """Side by side; with a pause (crash tests), one at a time with the pause between,
        so a kill can land between any two."""
        if self.pause:
            for pod in pods:
                await one(pod)
                await asyncio.sleep(self.pause)
        else:
            await asyncio.gather(*(one(p) for p in pods))

    async def _events(self, event: Event) -> None:
        message = event.message
        fresh = [p for p in event.pods if message not in self._said.get(p.key, ())]
        for pod in fresh:
            self._saying(pod, message)
        await asyncio.gather(*(self._event(p, event.type, event.reason, message)
                               for p in fresh))

    async def _event(self, pod: PodInfo, kind: EventType, reason: EventReason,
                     message: str, name: str | None = None) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "metadata": {**({"name": name} if name else {"generateName": f"{pod.name}."}),
                         "namespace": pod.namespace},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": pod.name,
                               "namespace": pod.namespace, "uid": pod.uid},
            "type": kind, "reason": reason, "message": message[:1024],
            "source": {"component": EVENT_SOURCE},
            "reportingComponent": "gpu-airlock.io/controller",
            "reportingInstance": self.identity or os.uname().nodename,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            async with self.event_limit:
                # Raw: the client's model objects would parse every timestamp back.
                await json_of(await self.core.create_namespaced_event(
                    pod.namespace, body=body, _preload_content=False))
        except ApiException as e:
            log.debug("event not recorded", extra={"status": e.status})
