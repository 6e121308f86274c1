"""Fences: the nodes a unit's pods are pinned away from at ungate, since kube-scheduler
knows nothing of what Airlock keeps. Off limits to the unit (the room reserved for the
head of the queue, nodes held for a preemptor), and room promised to pods let go but not
bound yet: the scheduler sees only bound pods, and its default scoring puts small pods on
empty nodes first, those the plan counted on for others. Pure."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection

from webhook.controller.core.actions import Action, Admit
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.placement.packing import Plan
from webhook.controller.core.placement.pins import pin_of
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.round import Round


def fenced_off(off_limits: Collection[str], plan: Plan, snap: Snapshot, anchor: PodInfo,
               key: str | None) -> tuple[str, ...]:
    """The nodes off limits that the scheduler could otherwise pick for the unit: in its
    domain, or among the nodes it may use at all. They are pinned away at ungate."""
    if not off_limits:
        return ()
    return tuple(sorted(set(off_limits).intersection(_near(snap, anchor, plan, key))))


def _near(snap: Snapshot, anchor: PodInfo, plan: Plan, key: str | None) -> Collection[str]:
    """The nodes the scheduler may pick for a unit placed by `plan`: those of its domain,
    or those it may use at all."""
    return set(snap.domains(anchor, key).get(plan.domain, ())) \
        if plan.domain is not None and key else snap.eligible_set(anchor)


def fence_promised(r: Round, actions: list[Action]) -> list[Action]:
    """`actions`, each unit the round admits also fenced off the nodes where the scheduler
    would find room for one of its pods that the round has promised to others, let go but
    not bound yet (admitted in this round, before or after it, or in an earlier one): the
    scheduler sees only bound pods, and its default scoring puts small pods on empty nodes
    first. Judged once the round is over, so a unit admitted first is kept off the room of
    those admitted after it too. Members pinned to their node need no fence; those that
    only prefer it do."""
    out: list[Action] = []
    for action in actions:
        if isinstance(action, Admit) and (plan := r.plans.get(action.unit)) is not None:
            # A unit's pods are its author's word: one that fails this keeps its record as
            # the stages made it, and every other unit its fence.
            with contextlib.suppress(Exception):
                action = _fenced(r.snap, action, plan)
        out.append(action)
    return out


def _fenced(snap: Snapshot, action: Admit, plan: Plan) -> Admit:
    record = action.record
    # A pod that only prefers its node may still be placed elsewhere: it is fenced too.
    loose = [p for p in action.ungate if pin_of(record, p) is None]
    promised = snap.promised(loose).difference(plan.assignments.values()) if loose else set()
    if not promised:
        return action
    near = _near(snap, loose[0], plan, record.topology_key)
    fenced = tuple(sorted(promised.intersection(near).union(record.fenced_off)))
    return dataclasses.replace(action, record=dataclasses.replace(record, fenced_off=fenced))
