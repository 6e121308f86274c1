"""What the soak found: its counts, the violations of each invariant (bench.soak.checking
names them), where the controller's kills landed in the preemption under way, and the text
and JSON that report them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VIOLATIONS = ("half-evicted gangs", "victims without their preemptor admitted next",
              "over-committed nodes", "evictions without an event", "partial gangs",
              "pods stored without Airlock's marks", "fair-share usage lost",
              "orphaned capacity requests", "controller exits")
# Where a kill landed in the preemption under way then (the latest preemptor to arrive).
PHASES = ("before the decision", "evicting", "victims terminating", "lifting gates",
          "after the gates")


@dataclass
class Findings:
    kills: int = 0
    preemptions: int = 0
    victims: int = 0
    reclaimed: int = 0  # of the victims, those evicted to give borrowed GPUs back
    requeued: int = 0
    evicted_by_others: int = 0
    admissions: int = 0
    preemptions_resumed: int = 0  # finished by a later controller than the one deciding
    admissions_resumed: int = 0
    kill_phases: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    restarts: dict[str, int] = field(default_factory=dict)
    refused: int = 0  # pod creations refused, and retried
    unreachable: int = 0  # pod creations that found no apiserver, and retried
    kept_reads: int = 0  # readings of what the leader kept
    # Members that found a placeholder in their room and landed once it was evicted.
    displaced_placeholders: int = 0
    # Seconds members waited, found unschedulable while the apiserver showed room for
    # them on the node they then landed on: the scheduler behind, not Airlock.
    placed_late: list[float] = field(default_factory=list)
    violations: dict[str, list[str]] = field(
        default_factory=lambda: {kind: [] for kind in VIOLATIONS})
    # Steps of the driver that did not happen in time (a preemptor never bound, ...).
    stalls: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not any(self.violations.values()) and not self.stalls

    def counts(self) -> dict[str, Any]:
        return {"kills": self.kills, "preemptions": self.preemptions,
                "victims": self.victims, "reclaimed": self.reclaimed,
                "requeued": self.requeued, "evictedByOthers": self.evicted_by_others,
                "admissions": self.admissions,
                "preemptionsFinishedByNextLeader": self.preemptions_resumed,
                "admissionsFinishedByNextLeader": self.admissions_resumed,
                "killsLanded": self.kill_phases, "restarts": self.restarts,
                "creationsRefused": self.refused, "creationsUnreachable": self.unreachable,
                "keptReads": self.kept_reads,
                "membersThatDisplacedAPlaceholder": self.displaced_placeholders,
                "membersPlacedLateWithRoom": len(self.placed_late),
                "longestLateSeconds": round(max(self.placed_late, default=0.0), 1),
                "violations": {k: len(v) for k, v in self.violations.items()},
                "stalls": self.stalls}

    def text(self, examples: int = 3) -> str:
        lines = [f"kills {self.kills}; preemptions {self.preemptions} ({self.victims} victim "
                 f"pods, {self.reclaimed} of them reclaimed from a borrower); admissions "
                 f"{self.admissions}; finished by the next leader: "
                 f"{self.preemptions_resumed} preemptions, {self.admissions_resumed} "
                 f"admissions; requeued pods {self.requeued}; pods evicted by others "
                 f"{self.evicted_by_others}",
                 "kills landed: " + ", ".join(f"{n} {phase}"
                                              for phase, n in self.kill_phases.items()),
                 "restarts: " + (", ".join(f"{kind} {n}" for kind, n in self.restarts.items())
                                 or "none") + f"; pod creations refused {self.refused}, "
                 f"unreachable {self.unreachable} (each retried); what the leader keeps "
                 f"read {self.kept_reads} times; members that landed once a placeholder "
                 f"was evicted from their room {self.displaced_placeholders}; members the "
                 f"scheduler placed late while their room was free "
                 f"{len(self.placed_late)} (longest "
                 f"{max(self.placed_late, default=0.0):.1f}s)"]
        for kind, found in [*self.violations.items(), ("stalled steps", self.stalls)]:
            lines.append(f"{kind}: {len(found)}")
            lines += [f"  {v}" for v in found[:examples]]
        return "\n".join(lines) + "\n"
