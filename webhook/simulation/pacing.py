"""How a running job's end follows the pods it has: its work is `runtime` seconds at full
size, done at the pace of the share of its pods bound, so an elastic job (`minPods`) that
starts with its minimum ends sooner as more of its pods join. `airlock simulate` and
bench.peers' replays both time jobs by it, so their figures compare."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pace:
    """A running job as of `since`: its work left, in seconds at full size, done with
    `bound` of its `pods` from then on."""

    work_left: float
    since: float
    bound: int
    pods: int

    @classmethod
    def start(cls, runtime: float, now: float, bound: int, pods: int) -> Pace:
        return cls(runtime, now, bound, pods)

    def rebound(self, now: float, bound: int) -> Pace:
        """The job from `now` on with `bound` pods: the work since done at the old pace."""
        return Pace(self.work_left - (now - self.since) * self.share, now, bound, self.pods)

    @property
    def share(self) -> float:
        return self.bound / self.pods

    @property
    def ends(self) -> float:
        # At full size exactly its work left: no division to round it.
        share = self.share
        return self.since + (self.work_left if share == 1 else self.work_left / share)
