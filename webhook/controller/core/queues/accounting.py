"""What the queues remember between rounds, kept by the leader: the fair-share usage
(sampled every few seconds, charged at each admission), since when running gangs have
been short of members, the run times of gangs that succeeded (for backfill), when gangs
were evicted (for the requeue backoff), and the PodDisruptionBudgets the watch delivers.
It builds the `QueueState` each round decides with, and says what the leader keeps in the
cluster for the next one (`memory`, `carry_on`). No I/O; the clock is passed in."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, assert_never

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.core.actions import (
    Action,
    Admit,
    Finish,
    Ignore,
    Preempt,
    Replan,
    Requeue,
    Wait,
)
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.configuring import fair_share_of, preemption_of, quotas_of
from webhook.controller.core.identities import UnitId
from webhook.controller.core.placement.runtimes import Key, Runtimes, key_of
from webhook.controller.core.preemption.budgets import Pdb, budgets_of
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues import shortfalls
from webhook.controller.core.queues.fairshare import FairShare
from webhook.controller.core.queues.modelquotas import ModelQuotas, model_quotas_of
from webhook.controller.core.queues.queueing import QueueState
from webhook.controller.core.queues.quotas import Quotas, holding
from webhook.policy.model import Policy


@dataclass(frozen=True, slots=True)
class QueueSample:
    """One queue at one sampling: for metrics and `airlock status`."""

    name: str
    nominal: GpuEquivalents
    used: GpuEquivalents
    borrowed: GpuEquivalents
    share: float


# What the leader keeps for the next one, by key in `remembering`'s ConfigMap.
FAIR_SHARE_KEY = "fairShare"
SHORT_SINCE_KEY = "shortSince"
RUNTIMES_KEY = "runtimes"


HOUR = 3600.0


class Accounts:
    def __init__(self) -> None:
        self.fair_share: FairShare | None = None
        self.evicted: dict[UnitId, float] = {}
        self.pdbs: dict[tuple[str, str], Pdb] = {}
        # Until the budgets are listed, nothing is preempted: a pod they protect could
        # not be told from one they do not.
        self.pdbs_listed = False
        self.short_since: dict[UnitId, shortfalls.Shortfall] = {}
        # A gang fell short since the leader last remembered: worth remembering at once,
        # not only at
        # the next sample. (One no longer short may wait: a gang whole again has a newer
        # record, so its old time no longer counts anyway.)
        self.newly_short = False
        self.runtimes = Runtimes()
        # When each pod moved in the last hour was (`moving`): the hour's budget. A new
        # leader starts it afresh.
        self.moved: list[float] = []
        # The head of the queue at the last round, and the domain reserved for it.
        self.reservation: tuple[UnitId, str] | None = None
        # Gangs and queued single pods Airlock admitted that run: their namespace and
        # class, when they were admitted, and the run time they state (None: none); one
        # done ran that long. Gangs short of members now: (present, size). Both kept
        # current from what changed in the cluster (`_catch_up`); `_caught_up` once the
        # first look at the cluster is taken.
        self._running: dict[UnitId, tuple[Key, float, float | None]] = {}
        self._short: dict[UnitId, tuple[int, int]] = {}
        self._caught_up = False
        self._configured: tuple[Policy, Accelerators, Quotas, PreemptionSettings,
                                ModelQuotas | None] | None = None

    def _configure(self, policy: Policy, accelerators: Accelerators
                   ) -> tuple[Quotas, PreemptionSettings, ModelQuotas | None]:
        found = self._configured
        if found is None or found[0] is not policy or found[1] is not accelerators:
            found = (policy, accelerators, quotas_of(policy, accelerators),
                     preemption_of(policy), model_quotas_of(policy))
            self._configured = found
        return found[2], found[3], found[4]

    def state(self, policy: Policy, cluster: Tracked, now: float,
              deleted: frozenset[str] = frozenset()) -> QueueState:
        quotas, preemption, models = self._configure(policy, cluster.accelerators)
        self.fair_share = fair_share_of(policy, self.fair_share, now)
        if not self.pdbs_listed:
            preemption = dataclasses.replace(preemption, enabled=False)
        backoff = preemption.requeue_backoff
        self.evicted = {g: t for g, t in self.evicted.items() if now - t < backoff}
        budgets = budgets_of(self.pdbs.values(), cluster) if self.pdbs else ()
        self._shortfalls(cluster, now)
        cluster.sort_models(policy.gpu_models)
        self.moved = [t for t in self.moved if now - t < HOUR]
        return QueueState(quotas, preemption, self.fair_share, budgets, dict(self.evicted),
                          policy.excluded_namespaces,
                          {g: s.since for g, s in self.short_since.items()}, deleted,
                          runtimes=self.runtimes, reservation=self.reservation,
                          models=models,
                          moves_left=max(preemption.moves_per_hour - len(self.moved), 0))

    def _shortfalls(self, cluster: Tracked, now: float) -> None:
        self._catch_up(cluster, now)
        membership = cluster.membership
        found = shortfalls.since(self.short_since, membership.gang, self._short, now)
        self.newly_short = self.newly_short or any(
            self.short_since.get(g) != s for g, s in found.items())
        self.short_since = found

    def _catch_up(self, cluster: Tracked, now: float) -> None:
        """What changed in the cluster since the last look: gangs short of members now;
        gangs and queued single pods Airlock admitted that run, and what those that
        succeeded teach of run times (from their admission to now, the moment they are
        found done: an estimate a little long only backfills less), and of what they ran
        of the time they stated, if they stated one. The first look learns nothing: what
        finished before this leader led is not its to judge."""
        learn, self._caught_up = self._caught_up, True
        membership, pods = cluster.membership, cluster.pods
        for unit in membership.changed():
            gang = membership.gang(unit)
            found = shortfalls.short((gang,), membership.succeeded) if gang else {}
            if unit in found:
                self._short[unit] = found[unit]
            else:
                self._short.pop(unit, None)
            if gang is None:
                ran = self._running.pop(unit, None)
                if ran is not None and learn and membership.succeeded[unit] > 0:
                    self.runtimes = self.runtimes.learned(ran[0], now - ran[1], ran[2])
            elif gang.records and unit not in self._running:
                self._running[unit] = (key_of(gang.members[0]), gang.records[0].at,
                                       gang.stated_runtime)
        # A queued single is a unit only until it is bound; it runs as a plain pod that
        # keeps its own record.
        for key in cluster.changed_singles():
            pod, unit = pods.get(key), UnitId.of_pod(key)
            record = pod.recorded.placement if pod is not None else None
            if pod is not None and pod.active and pod.node_name and record is not None:
                self._running.setdefault(unit, (key_of(pod), record.at, pod.marks.runtime))
                continue
            ran = self._running.pop(unit, None)
            if ran is not None and learn and pod is not None and pod.succeeded:
                self.runtimes = self.runtimes.learned(ran[0], now - ran[1], ran[2])

    def memory(self) -> dict[str, str]:
        """What the next leader needs to carry on: the fair-share usage, since when
        gangs have been short of members, and the run times learned."""
        found = {SHORT_SINCE_KEY: shortfalls.dumps(self.short_since),
                 RUNTIMES_KEY: self.runtimes.dumps()}
        if self.fair_share is not None:
            found[FAIR_SHARE_KEY] = self.fair_share.dumps()
        return found

    def remembered(self) -> None:
        """The leader stored `memory` in the cluster: nothing new is short since."""
        self.newly_short = False

    def carry_on(self, policy: Policy, memory: Mapping[str, str], now: float) -> None:
        """Start from what a former leader remembered (`memory`); what is missing or
        unreadable starts afresh."""
        fair = fair_share_of(policy, None, now)
        self.fair_share = fair.carried_on(memory[FAIR_SHARE_KEY]) if FAIR_SHARE_KEY in memory \
            else fair
        self.short_since = shortfalls.loads(memory.get(SHORT_SINCE_KEY, "{}"))
        self.runtimes = Runtimes.loads(memory.get(RUNTIMES_KEY, "{}"))

    def sample(self, policy: Policy, cluster: Tracked, now: float) -> list[QueueSample]:
        """Advance the fair share to `now` with what each queue holds, and say where each
        queue stands."""
        quotas, _, _ = self._configure(policy, cluster.accelerators)
        # Here too, not only in rounds: with no pod gated there are no rounds, and a gang
        # that lost a member without a replacement is short all the same.
        self._shortfalls(cluster, now)
        held = holding(quotas, cluster.occupancy.namespace_gpus)
        fair = fair_share_of(policy, self.fair_share, now).advance(now, held)
        self.fair_share = fair
        return [QueueSample(name, spec.nominal, held.get(name, 0),
                            max(held.get(name, 0) - spec.nominal, 0),
                            fair.share(name, spec.weight))
                for name, spec in sorted(quotas.specs.items())]

    def record(self, policy: Policy, accelerators: Accelerators, actions: Iterable[Action],
               now: float) -> None:
        """Admissions pay their entry charge; evicted gangs start their backoff; the
        head's reservation is kept for it."""
        quotas, _, _ = self._configure(policy, accelerators)
        self.reservation = None
        for action in actions:
            match action:
                case Admit():
                    if self.fair_share is not None:
                        self.fair_share = self.fair_share.charge(
                            quotas.queue_of(action.unit.namespace), action.gpus)
                case Preempt():
                    for victim in action.victims:
                        if victim.unit.kind == "gang":
                            self.evicted[victim.unit] = now
                        if victim.cause == "move":
                            self.moved.append(now)
                case Requeue():
                    self.evicted[action.unit] = now
                    self.short_since.pop(action.unit, None)
                case Wait():
                    if action.reserves is not None:
                        self.reservation = (action.unit, action.reserves)
                case Finish() | Replan() | Ignore():
                    pass
                case _:
                    assert_never(action)

    def list_pdbs(self, listed: list[Pdb]) -> None:
        self.pdbs = {p.key: p for p in listed}
        self.pdbs_listed = True

    def pdb_event(self, kind: str, obj: dict[str, Any]) -> None:
        pdb = Pdb.parse(obj)
        if kind == "DELETED":
            self.pdbs.pop(pdb.key, None)
        else:
            self.pdbs[pdb.key] = pdb
