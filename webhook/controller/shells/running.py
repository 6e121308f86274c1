"""`airlock controller`: watches feed a cache; while this replica leads, rounds of
snapshot -> decide -> apply run whenever the cache changes (and every few seconds, for
time-based rules such as reservation expiry)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, assert_never

from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection

from webhook import kubeclient
from webhook.accelerators import Accelerators
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.configuring import capacity_of, quotas_of
from webhook.controller.core.deciding import (
    Action,
    Admit,
    DecideOptions,
    Finish,
    Ignore,
    Preempt,
    Replan,
    Requeue,
    Wait,
)
from webhook.controller.core.gangs import SizeAnswer
from webhook.controller.core.growth.asking import awaiting, grow
from webhook.controller.core.health import Health
from webhook.controller.core.identities import UnitId
from webhook.controller.core.queues.modelquotas import model_usage
from webhook.controller.core.reasons import WaitReason
from webhook.controller.core.records import Seal
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.applying import WRITES_IN_FLIGHT, Applier
from webhook.controller.shells.cache import Cache
from webhook.controller.shells.dashboarding import state_of
from webhook.controller.shells.leading import (
    LEASE_SECONDS,
    RENEW_DEADLINE_SECONDS,
    RETRY_SECONDS,
    Fence,
    FencedLeaseLock,
)
from webhook.controller.shells.metrics import ControllerMetrics
from webhook.controller.shells.owners import OwnerSizes
from webhook.controller.shells.placeholding import Placeholding
from webhook.controller.shells.predicting import Predicting
from webhook.controller.shells.provisioning import Provisioning, open_units
from webhook.controller.shells.remembering import recall, store
from webhook.controller.shells.sealing import load_seal
from webhook.controller.shells.serving import serve
from webhook.controller.shells.watching import Watches
from webhook.conventions.base import Joins
from webhook.devices.claims import claims_gpus
from webhook.keys import SYSTEM_NAMESPACE
from webhook.kubewatch import passed_over
from webhook.logs import setup_logging
from webhook.policy.model import Policy
from webhook.policy.reloading import PolicyStore

log = logging.getLogger("airlock.controller")
PERIOD = 2.0
# Seconds between samples of what each queue holds (fair share, queue metrics).
SAMPLE = 10.0
SETTLE = 0.02
# Seconds between writes of what the leader keeps, when gangs fall short between samples
# (many gangs deleted at once each look short for a moment).
REMEMBER_AT_MOST_EVERY = 1.0
# As often as the webhook reloads, so both count the same accelerators within seconds.
POLICY_RELOAD_INTERVAL = 2.0


async def connect(kubeconfig: Path | None) -> client.ApiClient:
    configuration = await kubeclient.load_configuration(kubeconfig)
    # Room for the applier's writes and for the watches beside them.
    return kubeclient.api_client(configuration, in_flight=WRITES_IN_FLIGHT + 8)


class Controller:
    def __init__(self, api: client.ApiClient, options: DecideOptions, identity: str,
                 policies: PolicyStore, seal: Seal, pause: float = 0.0,
                 fence: Fence | None = None, namespace: str = SYSTEM_NAMESPACE) -> None:
        self.api = api
        self.namespace = namespace
        self.fence = fence or Fence(None)
        self.options = options
        self.policies = policies
        self._counted: tuple[Policy, Accelerators] | None = None
        self.cache = Cache(self.accelerators(), seal, self._policy().device_kinds)
        self.metrics = ControllerMetrics()
        self.sizes = OwnerSizes(api)
        self.applier = Applier(api, self.cache.stored, identity, seal, pause=pause,
                               fence=fence)
        self.placeholding = Placeholding(api, self.applier, self.metrics)
        self.provisioning = Provisioning(api, self.applier, self.metrics)
        self.health = Health()
        self.rounds = Rounds(options)
        self.accounts = self.rounds.accounts
        self.predicting = Predicting(self.applier, self.metrics)
        self.watches = Watches(api, self.cache, self.accounts, self.health)
        self.rounds_run = 0
        self.deciding_seconds = 0.0
        self.sampled = 0.0
        self.remembered_at = 0.0

    async def _sizes(self) -> dict[UnitId, SizeAnswer]:
        """Owner-stated sizes of the gangs that need one: cached answers at once, the
        misses looked up side by side (the applier's limit bounds the pool anyway)."""
        needed = self.cache.gangs_needing_size()
        found = await asyncio.gather(*(self.sizes.lookup(g, p, self._joins(p.namespace))
                                       for g, p in needed.items()))
        return dict(zip(needed, found, strict=True))

    def _joins(self, namespace: str) -> Joins:
        """Whether a pod template's pods join their gang: they request an accelerator,
        or claim GPUs through DRA."""
        counted, devices = self.accelerators(), self.cache.devices
        return lambda template: counted.joins(template) or claims_gpus(
            template, lambda kind, name: devices.asks((namespace, kind, name)),
            devices.kinds)

    def accelerators(self) -> Accelerators:
        """What the current policy counts; the store keeps the last good policy, and
        the controller does not start without one."""
        policy = self.policies.policy
        assert policy is not None
        if self._counted is None or self._counted[0] is not policy:
            self._counted = policy, policy.counted()
        return self._counted[1]

    async def round(self) -> None:
        # A gang short of members is decided too, gated pods or not: it may be due for
        # its requeue (`sample` notices it short when nothing is gated); a record the
        # controller did not write is told of; and a pod let go pinned to a node, not
        # bound yet, is re-planned if that node fails it.
        membership = self.cache.cluster.membership
        if not self.cache.gated and not self.accounts.short_since and \
                not membership.distrusted and not membership.pinned and \
                not self.cache.placeholders and not self.cache.requests:
            self.metrics.waiting(())
            return
        sizes = await self._sizes()
        started = time.perf_counter()
        now = time.time()
        actions = self.rounds.run(self._policy(), self._cluster(), now, sizes,
                                  self.applier.recently_deleted(), awaiting(
                                      [*self.cache.placeholders.values(),
                                       *self.cache.requests.values()]))
        self.deciding_seconds = time.perf_counter() - started
        self.metrics.fit_seconds.observe(self.deciding_seconds)
        # Before anything awaits: the forecast, forked off the loop, reads the cluster as
        # the round saw it, and tells what it finds when it ends.
        self.predicting.after(self.rounds, actions, now)
        if self.accounts.newly_short and now - self.remembered_at >= REMEMBER_AT_MOST_EVERY:
            await self.remember()
        actions = await self._grow(actions, now)
        await self.applier.apply(actions)
        self.rounds_run += 1
        if self.rounds_run % 500 == 0:
            self.applier.forget_all_but(self.cache.pods.keys())
        self._count(actions)

    async def _grow(self, actions: list[Action], now: float) -> list[Action]:
        """Capacity requests: made for the gangs that ask, in the policy's mode; those of
        either kind there are ended as `growing` says (with the mode turned off, or
        changed, the other kind's all end). The round's actions, the admissions into
        room a ProvisioningRequest booked marked to consume it."""
        policy = self._policy()
        mode, pr_class = policy.capacity.mode, policy.capacity.provisioning_class
        settings = capacity_of(policy)
        quotas = quotas_of(policy, self.cache.cluster.accelerators)
        nodes = self.cache.nodes.values()
        placeholders, requests = self.cache.placeholders, self.cache.requests
        if mode == "placeholders" or placeholders:
            await self.placeholding.apply(grow(
                actions if mode == "placeholders" else [], quotas, placeholders.values(),
                self.placeholding.failed, now, settings), settings, nodes, policy.gpu_models)
        if mode == "provisioningRequest" or requests:
            actions = self.provisioning.consume(actions, open_units(requests.values()),
                                                pr_class, policy.gpu_models)
            await self.provisioning.apply(grow(
                actions if mode == "provisioningRequest" else [], quotas, requests.values(),
                self.provisioning.failed, now, settings), settings, nodes, pr_class,
                policy.gpu_models)
        self.metrics.placeholders.set(len(placeholders))
        return actions

    def _cluster(self) -> Tracked:
        """The tracked cluster, counting what the current policy counts."""
        cluster = self.cache.cluster
        cluster.count_as(self.accelerators())
        policy = self._policy()
        if self.cache.count_devices_as(policy.device_kinds, policy.gpu_models):
            self.watches.relist_slices()
        return cluster

    def _policy(self) -> Policy:
        policy = self.policies.policy
        assert policy is not None  # the controller does not start without one
        return policy

    def dashboard_state(self) -> Callable[[], dict[str, Any]]:
        """What the dashboard shows now, to compute (`dashboarding`)."""
        return state_of(self._policy(), self.cache, self.accounts, self.accelerators(),
                        time.time())

    async def sample(self) -> None:
        """Fair share, queue metrics and short gangs move with time, gated pods or not;
        they are kept in the cluster for the next leader."""
        now = time.time()
        if now - self.sampled < SAMPLE:
            return
        self.sampled = now
        cluster = self._cluster()
        policy = self._policy()
        self.metrics.queues(self.accounts.sample(policy, cluster, now))
        self.metrics.models(model_usage(policy, cluster))
        await self.remember()

    async def remember(self) -> None:
        self.remembered_at = time.time()
        memory = self.accounts.memory()
        self.accounts.remembered()
        await store(client.CoreV1Api(self.api), self.namespace, memory,
                   self.fence)

    def _count(self, actions: list[Action]) -> None:
        waiting: dict[UnitId, WaitReason] = {}
        ignored = 0
        for action in actions:
            match action:
                case Admit():
                    self.metrics.admitted.inc()
                    arrival = min(p.created for p in action.ungate)
                    self.metrics.time_to_admit.observe(max(time.time() - arrival, 0.0))
                case Wait():
                    waiting[action.unit] = action.reason
                case Preempt():
                    self.metrics.preempted(action.victims)
                case Requeue():
                    self.metrics.requeued.inc()
                case Replan():
                    self.metrics.replanned.inc()
                case Ignore():
                    ignored += 1
                case Finish():
                    pass
                case _:
                    assert_never(action)
        self.metrics.waiting(waiting.values())
        self.metrics.records_ignored.set(ignored)
        self.metrics.pods_unreadable.set(self.cache.unreadable)
        self.metrics.objects_passed_over.set(passed_over())

    async def lead(self) -> None:
        log.info("leading: deciding from now on")
        self.health.leading()
        self.cache.telling = True
        await self.watches.synced.wait()
        self.accounts.carry_on(self._policy(),
                               await recall(client.CoreV1Api(self.api), self.namespace),
                               time.time())
        await self.applier.retell(self.cache.pods.values())
        while True:
            self.cache.changed.clear()
            self.deciding_seconds = 0.0
            try:
                await self.sample()
                await self.round()
            except Exception as e:
                log.exception("round failed; retrying")
                self.health.round_failed(f"{type(e).__name__}: {str(e)[:200]}")
                self.metrics.rounds_failed.inc()
            else:
                self.health.looped()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.cache.changed.wait(), PERIOD)
            # Let a burst of events (a gang's pods arriving) settle into one round; and
            # in a large, busy cluster, where deciding takes long and something always
            # changed, rest as long as deciding took: at most half a core on it.
            await asyncio.sleep(max(SETTLE, self.deciding_seconds))


async def _main(args: argparse.Namespace, policies: PolicyStore) -> int:
    api = await connect(args.kubeconfig)
    options = DecideOptions(order=args.order, reservation_timeout=args.reservation_timeout,
                            incomplete_warning_after=args.incomplete_warning_after,
                            pin=args.pin, forecast_resolution=args.forecast_resolution)
    fence = Fence(None if args.no_leader_election else RENEW_DEADLINE_SECONDS)
    seal = await load_seal(client.CoreV1Api(api), args.namespace)
    controller = Controller(api, options, args.identity, policies, seal,
                            pause=args.patch_pause, fence=fence, namespace=args.namespace)
    reloading = asyncio.create_task(policies.watch(POLICY_RELOAD_INTERVAL))
    runner = await serve(args, controller.metrics.registry, controller.health, api,
                         controller.dashboard_state)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watching = asyncio.create_task(controller.watches.run())
    if args.no_leader_election:
        work = asyncio.create_task(controller.lead())
    else:
        lock = FencedLeaseLock(args.lease_name, args.namespace, args.identity, api, fence)
        election = leaderelection.LeaderElection(electionconfig.Config(
            lock, lease_duration=LEASE_SECONDS, renew_deadline=RENEW_DEADLINE_SECONDS,
            retry_period=RETRY_SECONDS,
            onstarted_leading=controller.lead, onstopped_leading=_lost_lead(stop)))
        work = asyncio.create_task(election.run())
    await asyncio.wait([asyncio.create_task(stop.wait()), work, watching],
                       return_when=asyncio.FIRST_COMPLETED)
    for task in (work, watching, reloading):
        task.cancel()
    if runner is not None:
        await runner.cleanup()
    await api.close()
    return 0


def _lost_lead(stop: asyncio.Event) -> Any:
    async def lost() -> None:
        # Another replica may be leading now: stop, and let Kubernetes restart us as a
        # follower, rather than risk two deciders.
        log.error("lost the lease; stopping")
        stop.set()
    return lost


def run_controller(args: argparse.Namespace) -> int:
    setup_logging()
    policies = PolicyStore(args.policies)
    if policies.reload_if_changed() == "failed":
        # Counting the wrong resources would let gangs go onto nodes that lack what they
        # need: no policy, no controller.
        print(f"airlock controller: no valid policy in {args.policies}, so it cannot know "
              f"which resources are accelerators; fix these and start again:\n"
              f"{policies.last_error}", file=sys.stderr)
        return 1
    return asyncio.run(_main(args, policies))
