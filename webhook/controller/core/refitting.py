"""A blocked unit fitted again, as the stages ask when the plan for all of it failed: the
most of an elastic gang that fits, and whether it would fit in room that pods marked for
deletion still hold."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang
from webhook.controller.core.placement.fitting import NoFit, fit
from webhook.controller.core.placement.joining import fit_joiners
from webhook.controller.core.placement.packing import Plan
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.queueing import Queueing
from webhook.controller.core.round import Round, Unit


def over_quota(queues: Queueing, gang: Gang, pods: Sequence[PodInfo], exempt: int
               ) -> str | None:
    """Why admitting `pods` would take the gang's queue past its quota, but for the
    first `exempt` of them: a running gang's replacements, which restore what it was
    admitted with."""
    charged = pods[exempt:]
    return queues.over_quota(gang, charged) if charged else None


def _fit(u: Unit, pods: Sequence[PodInfo], snap: Snapshot) -> Plan | NoFit:
    """`pods` of the unit fitted in `snap`, where they may go: with the gang, once it
    runs; anywhere in its topology, before."""
    if u.started:
        return fit_joiners(u.gang, pods, snap, u.avoid)[0]
    anchor = u.anchor
    return fit(pods, snap, anchor.marks.topology_key, anchor.marks.topology_mode,
               avoid=u.avoid)


def most_that_fits(r: Round, u: Unit, least: int) -> tuple[list[PodInfo], Plan] | None:
    """The most of an elastic gang's members (the first ones, at least `least`) that fit
    and, beyond the exempt first, its queue's quota; by halving, since any fewer of them
    fit too."""
    gang, pods = u.gang, u.members

    def plan(count: int) -> Plan | None:
        some = pods[:count]
        if over_quota(r.queues, gang, some, u.exempt) is not None or \
                r.queues.model_quota(gang, some[u.exempt:], u.model)[1] is not None:
            return None
        outcome = _fit(u, some, r.snap)
        return outcome if isinstance(outcome, Plan) else None

    best: tuple[list[PodInfo], Plan] | None = None
    low, high = least, len(pods) - 1
    while low <= high:
        middle = (low + high) // 2
        found = plan(middle)
        if found is None:
            high = middle - 1
        else:
            best, low = (pods[:middle], found), middle + 1
    return best


def fits_once_gone(r: Round, u: Unit) -> bool:
    """Whether the unit would fit once the pods marked for deletion are gone. Until then
    kube-scheduler counts their room, so the unit may not have it; nor should it evict
    others for room that frees by itself in a grace period (kube-scheduler does not
    preempt for a pod whose nominated node holds a terminating one either)."""
    gone = r.once_gone()
    if gone is None:
        return False
    key = None if u.alike is None else (*u.alike, u.model)
    known = None if key is None else r.fits_once_gone.get(key)
    if known is None:
        known = isinstance(_fit(u, u.members, gone), Plan)
        if key is not None:
            r.fits_once_gone[key] = known
    return known
