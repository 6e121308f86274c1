"""A unit's way through a round, as a short list of named stages in the spirit of the
scheduler framework's extension points. Each stage reads what the stages before it found
(`round.Unit`) and returns one thing: `None` to go on, or the unit's verdict for this
round (a `Wait` with its reason code, a `Preempt`, an `Admit` with its placement), or
`STOP` when there is nothing to say yet. The controller, `airlock simulate` and `airlock
status` all decide through these stages (`deciding`).

    members    who goes now: the whole gang, or its joiners (Incomplete, SizeUnknown)
    queue      its place in the queue: behind the head, backing off, awaiting capacity
    borrow     the head's reservation: what it may not use, or may borrow until it ends
    place      a plan, or why none (NoRoom, NoDomainFits, NeverFits), on the first GPU
               model in its queue's order that has room (where policy names models)
    quota      whether its queue's quota and borrowing admit it (a unit that fits)
    shrink     an elastic gang that does not fit whole: the most of it that does
    make_room  blocked: it preempts, where it may and victims exist; or, the head, has
               a few pods moved out of one domain (defragmentation); neither where room
               that pods being deleted free would hold it
    reserve    blocked still: it waits, and the first such heads the queue
    admit      its plan taken in the snapshot and recorded: admitted
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from webhook.controller.core.actions import Action, Admit, Preempt, Wait
from webhook.controller.core.fences import fenced_off
from webhook.controller.core.gangs import Gang, Shape
from webhook.controller.core.members import (
    joiners,
    joining_note,
    new_members,
    present,
    size_of,
)
from webhook.controller.core.placement.fitting import NoFit, fit
from webhook.controller.core.placement.joining import fit_joiners
from webhook.controller.core.placement.packing import Plan, take_plan
from webhook.controller.core.placement.pins import pinnable, planned_nodes, steerable
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.modelquotas import Model
from webhook.controller.core.queues.queueing import Hold
from webhook.controller.core.records import Record
from webhook.controller.core.refitting import fits_once_gone, most_that_fits, over_quota
from webhook.controller.core.round import Round, Unit


class _Stop:
    """A stage's verdict that there is nothing to say of the unit this round."""


STOP: Final = _Stop()
FREEING: Final = ("; pods being deleted hold room it would fit in, and it waits for them "
                  "rather than evict others")
Verdict = Wait | Admit | Preempt | _Stop | None
Stage = Callable[[Round, Unit], Verdict]


def members(r: Round, u: Unit) -> Verdict:
    gang = u.gang
    size = size_of(gang, r.sizes)
    if size is None:  # its owner is being looked up
        return STOP
    if isinstance(size, Wait):
        return size
    u.size, u.minimum = size, gang.minimum(r.sizes, size)
    u.least = size if u.minimum is None else u.minimum
    warn = r.options.incomplete_warning_after
    take, told = (joiners(gang, size, u.least, r.now, warn) if u.started
                  else new_members(gang, size, u.least, r.now, warn, r.snap))
    u.told.extend(told)
    if take is None:
        return STOP
    u.members, u.must, u.exempt = take.members, take.must, take.exempt
    return None


def queue(r: Round, u: Unit) -> Verdict:
    gang, pods = u.gang, tuple(u.members)
    if (why := r.reservation.behind()) is not None:
        return Wait(gang.id, pods, "BehindHead", why)
    if u.started:
        return None
    if (why := r.queues.backing_off(gang)) is not None:
        return Wait(gang.id, pods, "BackingOff", why)
    if gang.id in r.queues.state.awaiting:
        # Still asking: it heads its queue, as it did when it asked.
        r.reservation.claim(gang, NoFit(""))
        return Wait(gang.id, pods, "AwaitingCapacity", "the room it asked the autoscaler "
                    "for is not all there yet", may_grow=True)
    return None


def borrow(r: Round, u: Unit) -> Verdict:
    # An elastic gang may run with its minimum, and then longer: as long as the work of
    # its whole size takes at the pace of its minimum.
    stretch = 1.0 if u.minimum is None else u.size / u.least
    reserved, u.until = r.reservation.off_limits(u.members, stretch, u.gang)
    if u.hold is not None:
        u.off_limits = reserved | r.held_by_others(u.gang.id)
    else:
        u.off_limits = reserved | r.held if r.held else reserved
    if not u.started and u.hold is None:
        anchor, gang = u.anchor, u.gang
        u.alike = (anchor.marks.topology_key, anchor.marks.topology_mode, bool(reserved),
                   gang.shape if gang.whole(u.members) else Shape.of(u.members))
    return None


def place(r: Round, u: Unit) -> Verdict:
    if u.hold is None or u.started:
        return _place(r, u)
    # A preemptor goes first where its victims made room, so other room freed meanwhile
    # is left to the units after it, which would otherwise evict for more.
    wide = u.off_limits
    u.off_limits = wide | (r.snap.nodes.keys() - u.hold.nodes)
    verdict = _place(r, u)
    u.off_limits = wide
    if verdict is None and isinstance(u.outcome, Plan) and u.over_model is None:
        return None
    u.over_model = None
    return _place(r, u)


def _place(r: Round, u: Unit) -> Verdict:
    anchor, gang = u.anchor, u.gang
    u.key = anchor.marks.topology_key
    if u.started:
        # Joiners go where the gang runs: its domain, and its model.
        recorded = next((rec for rec in gang.records if rec.model is not None), None)
        if recorded is not None:
            u.model, u.model_off = recorded.model, r.outside(recorded.model)
        u.outcome, home = fit_joiners(gang, u.members, r.snap, u.avoid)
        u.key = home or u.key
        return None
    last = r.queues.state.reservation
    reserved = last[1] if last is not None and last[0] == gang.id else None
    if r.queues.state.models is not None:
        return _on_models(r, u, reserved)
    known = r.no_room.get(u.alike) if u.alike is not None and reserved is None else None
    u.fresh = known is None
    u.outcome = known or fit(u.members, r.snap, u.key, anchor.marks.topology_mode,
                             level=u.key or "topology", avoid=u.off_limits,
                             reserved=reserved, gang=gang)
    if u.alike is not None and isinstance(u.outcome, NoFit):
        r.no_room[u.alike] = u.outcome
    return None


def quota(r: Round, u: Unit) -> Verdict:
    if isinstance(u.outcome, NoFit):
        # Blocked already: the stages after read no quota of a unit that does not fit
        # (a smaller elastic gang asks its own), and most of a deep queue does not.
        return None
    u.over = u.over_model or over_quota(r.queues, u.gang, u.members, u.exempt)
    if u.over is None and u.started and u.model is not None:
        u.over = r.queues.model_quota(u.gang, u.members[u.exempt:], u.model)[1]
    return None


Choice = tuple[Model, frozenset[str], Plan | NoFit, bool]


def _on_models(r: Round, u: Unit, reserved: str | None) -> Verdict:
    """Place the unit whole on one GPU model: the first in its order with room within
    the queue's quota of it; else the first it could borrow; else the first with room,
    over quota; else it waits for the first model with room."""
    anchor, gang = u.anchor, u.gang
    named = anchor.constraints.models_named
    apart = [p for p in u.members if p.constraints.models_named != named]
    if apart:
        # The webhook sees one pod at a time: only here do the gang's pods meet.
        return Wait(gang.id, tuple(u.members), "Invalid",
                    f"its pods name different GPU models: {_models_named(anchor)}, "
                    f"{_models_named(apart[0])}; a gang runs on one model, so give every pod "
                    f"the same gpu-airlock.io/gpu-models and DRA claims", warning=True)
    if named is None:
        return Wait(gang.id, tuple(u.members), "Invalid", _no_model(anchor), warning=True)
    order = r.queues.model_order(gang, named)
    if not order:
        return Wait(gang.id, tuple(u.members), "NeverFits",
                    f"its pods name GPU models {', '.join(named)}, none of which "
                    f"its queue {r.queues.queue_of(gang)} may use", warning=True)
    borrowed: Choice | None = None
    over: tuple[Choice, str] | None = None
    waits: list[Choice] = []
    for model in order:
        off = r.outside(model)
        alike = (u.alike, model) if u.alike is not None and reserved is None else None
        known = r.no_room.get(alike) if alike is not None else None
        outcome = known or fit(u.members, r.snap, u.key, anchor.marks.topology_mode,
                               level=u.key or "topology", avoid=u.off_limits | off,
                               reserved=reserved, gang=gang)
        choice = (model, off, outcome, known is None)
        if isinstance(outcome, NoFit):
            if alike is not None:
                r.no_room[alike] = outcome
            waits.append(choice)
            continue
        within, why = r.queues.model_quota(gang, u.members[u.exempt:], model)
        if within or (why is None and r.queues.borrows_first(gang)):
            return _choose(u, choice)
        if why is None:
            borrowed = borrowed or choice
        elif over is None:
            over = choice, why
    if borrowed is not None:
        return _choose(u, borrowed)
    if over is not None:
        return _choose(u, over[0], over[1])
    # A model where waiting helps before one where it never would.
    return _choose(u, min(waits, key=lambda c: isinstance(c[2], NoFit) and c[2].never))


def _models_named(pod: PodInfo) -> str:
    named = pod.constraints.models_named
    return f"{pod.name} ({'none' if named is None else ', '.join(named) or 'any'})"


def _no_model(pod: PodInfo) -> str:
    c = pod.constraints
    if not c.claim_models:
        return (f"pod {pod.name}'s DRA claims select GPUs of no model the policy defines "
                f"(spec.gpuModels[].deviceAttributes); change the claim's selector or the "
                f"policy")
    return (f"pod {pod.name} names GPU models {', '.join(c.gpu_models)} "
            f"(gpu-airlock.io/gpu-models), but its DRA claims select "
            f"{', '.join(c.claim_models)}; name one model both allow")


def _choose(u: Unit, choice: Choice, over: str | None = None) -> Verdict:
    u.model, u.model_off, u.outcome, u.fresh = choice
    u.over_model = over
    return None


def shrink(r: Round, u: Unit) -> Verdict:
    if not _blocked(u) or u.must >= len(u.members):
        return None
    fewer = most_that_fits(r, u, max(u.must, 1))
    if fewer is not None:
        u.members, u.outcome = fewer
        u.over = None
        return None
    if not u.must:
        # Above an elastic gang's minimum: room as it frees, never reserved or made.
        return Wait(u.gang.id, tuple(u.members), "Growing",
                    f"{len(u.members)} pods above the gang's minimum of {u.least} wait for "
                    f"room in its domain")
    u.members = u.members[:u.must]
    return None


def make_room(r: Round, u: Unit) -> Verdict:
    if not _blocked(u):
        return None
    gang = u.gang
    if isinstance(u.outcome, NoFit) and u.outcome.never:
        # Not the head: it would reserve room it can never use from the units behind,
        # and no eviction makes it fit.
        return Wait(gang.id, tuple(u.members), u.outcome.code,
                    f"{present(gang, u.members, u.size)}{u.outcome.reason}", warning=True,
                    may_grow=_grows(r, u), model=u.model)
    # A unit whose victims are going (`hold`) waits for them: the watch may not have told
    # of every deletion yet, and preempting again would evict more than it needs.
    if u.started or u.hold is not None:
        return None
    if not r.queues.plans_left():
        # The round's plans are spent: neither evicting nor moving is looked at, and a
        # deep queue ends here.
        return None
    head = r.reservation.head is None
    may_preempt = r.queues.may_preempt(gang, u.members)
    # The head that free GPUs would hold, were they in one domain: a few pods moved.
    may_move = head and u.over is None and isinstance(u.outcome, NoFit) and \
        u.outcome.code == "NoDomainFits" and r.queues.may_move(gang, u.members)
    if not (may_preempt or may_move):
        return None
    if isinstance(u.outcome, NoFit) and fits_once_gone(r, u):
        u.outcome = dataclasses.replace(u.outcome, reason=f"{u.outcome.reason}{FREEING}")
        return None
    # Room reserved for the head is lent on a promise to end in time, never taken by
    # evicting what runs there; nor is room held for another preemptor.
    avoid = r.reservation.nodes | r.held | u.model_off
    preempt = r.queues.preempt(gang, u.members, avoid, head=head, model=u.model) \
        if may_preempt else None
    if preempt is None and may_move:
        preempt = r.queues.move(gang, u.members, avoid, u.model)
    if preempt is None:
        return None
    r.reservation.claim(gang, NoFit(""))  # strict order waits behind it
    r.hold(gang.id, preempt.record.nodes)
    return preempt


def reserve(r: Round, u: Unit) -> Verdict:
    if not _blocked(u):
        return None
    gang, said = u.gang, present(u.gang, u.members, u.size)
    if isinstance(u.outcome, NoFit):
        # One alike judged before (not `fresh`) heads the queue already.
        if u.fresh:
            r.reservation.claim(gang, u.outcome, u.members)
        reserves = u.outcome.best_domain if r.reservation.head == gang.id else None
        return Wait(gang.id, tuple(u.members), u.outcome.code, f"{said}{u.outcome.reason}",
                    may_grow=_grows(r, u), reserves=reserves, model=u.model)
    # Over quota: it reserves no capacity, which units of other queues may use.
    return Wait(gang.id, tuple(u.members), "OverQuota", f"{said}{u.over}")


def admit(r: Round, u: Unit) -> Verdict:
    plan, gang, anchor = u.outcome, u.gang, u.anchor
    assert isinstance(plan, Plan)  # not blocked: the stages before would have said
    take_plan(plan, u.members, r.snap)
    r.plans[gang.id] = plan
    r.release(gang.id)
    r.queues.admitted(gang, u.members, model=u.model)
    names = tuple(sorted(p.name for p in u.members))
    record = Record(plan.domain, u.key if plan.domain else None, names, r.now, u.size,
                    minimum=u.minimum,
                    slice_key=anchor.marks.slice_key if plan.slices else None,
                    slices=tuple(sorted((k.name, v) for k, v in plan.slices.items())),
                    backfilled_until=r.reservation.borrowed_until(plan, u.until),
                    fenced_off=fenced_off(u.off_limits - u.model_off, plan, r.snap, anchor,
                                          u.key),
                    model=u.model, model_labels=r.pins(u.model),
                    nodes=planned_nodes(plan, u.members) if r.options.pin == "nodes" else ())
    # A preemptor's pods are nominated to their nodes, where the victims may still be
    # terminating: kube-scheduler then waits for them instead of preempting more. Pods
    # nominated for a hold that ended are nominated anew, where they now go; a pod already
    # nominated to its node (at the preemption) is not written again. A pod only steered
    # (`pins`) is nominated to its node too: kube-scheduler takes a nominated node that
    # fits unscored, and its scoring ties the steering preference with the class's pod
    # affinity, which would draw the pod to its gang's first pods, on others' room.
    had = {p.name: p.nominated for p in u.members}
    every = u.hold is not None or any(had.values())
    steered = {p.name for p in u.members if steerable(p) and not pinnable(p)} \
        if r.options.pin == "nodes" else set()
    nominate = tuple(pair for pair in plan.nominations() if had[pair[0]] != pair[1]
                     and (every or pair[0] in steered)) if every or steered else ()
    return Admit(gang.id, record, min(u.members, key=lambda p: p.name), tuple(u.members),
                 r.snap.need(u.members), joining_note(gang, u.size) if u.started else "",
                 nominate)


STAGES: Final[tuple[Stage, ...]] = (members, queue, borrow, place, quota, shrink, make_room,
                                    reserve, admit)


def consider(r: Round, gang: Gang, hold: Hold | None = None) -> list[Action]:
    """What the round decides for one unit (with room `hold` held for it, when it
    preempted and its victims are gone)."""
    u = Unit(gang, hold, gang.started)
    for stage in STAGES:
        verdict = stage(r, u)
        if verdict is not None:
            return [*u.told] if isinstance(verdict, _Stop) else [*u.told, verdict]
    raise AssertionError("the last stage admits")


# --- what the stages share -------------------------------------------------------------

def _blocked(u: Unit) -> bool:
    return isinstance(u.outcome, NoFit) or u.over is not None


def _grows(r: Round, u: Unit) -> bool:
    """Whether more nodes would let it in: its queue would admit it into a grown
    cluster (never a unit that runs, or whose victims are going, or that fits in room
    pods being deleted free by themselves)."""
    return not u.started and u.hold is None and r.queues.may_grow(u.gang, u.members) \
        and not fits_once_gone(r, u)
