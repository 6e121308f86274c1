"""Why a gang (or a queued single pod) waits: a closed set of codes, each with what it
means. The code is the reason of the gang's event, the `reason` of each waiting gang in
`airlock status -o json`, and the `reason` label of `airlock_gangs_waiting`; the message
beside it says the particulars for people."""

from __future__ import annotations

from typing import Final, Literal, get_args

WaitReason = Literal[
    "Incomplete", "SizeUnknown", "Oversize", "BehindHead", "BackingOff", "NoRoom",
    "NoDomainFits", "NeverFits", "OverQuota", "AwaitingVictims", "AwaitingCapacity",
    "Growing", "Invalid",
]
WAIT_REASONS: Final[tuple[WaitReason, ...]] = get_args(WaitReason)

MEANING: Final[dict[WaitReason, str]] = {
    "Incomplete": "not every pod of the gang exists yet (a warning once it has waited "
                  "long)",
    "SizeUnknown": "the gang's size cannot be known (its owner kind is not installed, or "
                   "its pods state different sizes)",
    "Oversize": "the pod is beyond the gang's size: it is not part of the gang",
    "BehindHead": "under the strict order, the gang behind the head of the queue waits "
                  "for it",
    "BackingOff": "the gang was evicted moments ago, and waits its requeue backoff",
    "NoRoom": "the gang's pods do not fit on the nodes they may use (and no preemption "
              "makes them fit, or may be tried yet)",
    "NoDomainFits": "no single topology domain the gang must (or should) share has room "
                    "for all of it",
    "NeverFits": "no domain or set of nodes could ever hold the gang, even empty",
    "OverQuota": "admitting the gang would take its queue past its nominal quota and "
                 "borrowing limit",
    "AwaitingVictims": "the gang preempted others, and waits for them to be gone; the "
                       "room is held for it",
    "AwaitingCapacity": "the gang asked the cluster's autoscaler for room, and waits for "
                        "all of it to be there (docs/autoscaling.md)",
    "Growing": "an elastic gang runs with at least its minimum; these pods of it wait for "
               "room in its domain and take it as it frees, never by preemption",
    "Invalid": "a pod of the unit carries a value Airlock cannot follow (out of bounds, or "
               "a mark of Airlock's the webhook never wrote), or deciding it failed: it is "
               "set aside, and the round goes on for everyone else",
}


def lead(reason: WaitReason, warning: bool) -> str:
    """The word a wait's message starts with: what a person reading the events list
    scans for."""
    if reason == "Incomplete":
        return "Incomplete" if warning else "Waiting"
    if reason in ("SizeUnknown", "Oversize", "Invalid"):
        return reason
    return "Waiting"
