"""The controller's durable records and the one codec they go through.

A decision the controller must finish after a crash is written on a pod before anything
is done about it: a placement (`gpu-airlock.io/placement`, on the anchor of the members it
admits, in the same patch as the anchor's ungate) and a preemption
(`gpu-airlock.io/preemption`, on the preemptor's anchor, before any victim goes).

A pod's annotations are its creator's to write, so a record is acted on only when the
controller can prove it wrote it. Every record is sealed: its version, its kind and the uid
of the pod it is written on go into an HMAC-SHA256 with a key only the controller reads
(a Secret in Airlock's namespace, `sealing`). A record copied to another pod, edited, or
written by anyone else does not open. Records written before sealing existed (no version)
open only on pods created before the key, so an upgrade in the middle of a lift or a
preemption loses nothing while no new pod can pass one off.

Pure: the key and the clock come in as arguments.

The package's modules: the decisions as data (`decisions`), the codec that seals and
opens them (`seals`), and what a leader keeps for the next one (`memory`). What callers
use is named here.
"""

from webhook.controller.core.records.decisions import AnyRecord, Kind, PreemptionRecord, Record
from webhook.controller.core.records.memory import MemoryKind, dump_memory, load_memory
from webhook.controller.core.records.seals import (
    FUTURE_SKEW,
    VERSION,
    Opener,
    Seal,
    Untrusted,
    Unverified,
    peek,
)

__all__ = ["FUTURE_SKEW", "VERSION", "AnyRecord", "Kind", "MemoryKind", "Opener",
           "PreemptionRecord", "Record", "Seal", "Untrusted", "Unverified", "dump_memory",
           "load_memory", "peek"]
