"""How long work is expected to run, for backfill (`backfill`) and forecasts
(`forecasting`, `typical`): what a pod states (the webhook's `expected-runtime-seconds`,
from the user's `expected-runtime` or the pod's `activeDeadlineSeconds`), else what gangs
of its namespace and class took lately.

A learned estimate is the longest run time of the last `WINDOW` gangs (and queued single
pods) of that namespace and class that succeeded, once at least `LEAST` did; not a mean, nor
a lower quantile. An estimate short of the truth lets a backfill run past the head's
start, and then it is evicted (the first victim of the head) with all its work: run
times of a class spread over a factor of ten, and the 90th percentile of a window, tried
first, overran for one job in ten, each a restart of hours of work in the comparison
with the peers (docs/alternatives.md). One too long only backfills less. A window
rather than all of history, so a workload that changed is judged by what it does now.

Per namespace, not per queue: what a namespace teaches is its own work's estimate only.
Twenty jobs that exit at once would otherwise teach a queue shared by several teams about
15 s, and the other teams' gangs would be backfilled on it and evicted as overruns. A
namespace can only mislead its own backfills.

A gang's run time is from its admission (its placement record) to when the controller
saw its last member succeed: what a backfill promises is counted from its admission too.

A forecast (`typical`) wants the expected run time, not a safe bound: the median of the
window, and for a unit that states its run time, what it states times the median ratio
of run time to stated time that gangs of its namespace and class which stated one showed
(once `LEAST` did). Stated times are mostly long (users round up, and a deadline must
leave room): on `shaped.jsonl` the runs take a median 0.84 of what they state, and a
forecast taking the stated time at its word predicts what waits behind them late. Backfill
keeps the stated time as it is: a promise shortened by a ratio would overrun.

The median of the window counts the units of the kind still running (`running`,
`survival`): the runs that ended are the short ones, while the long ones still run.
Before `LEAST` of a namespace and class succeeded, a forecast takes the runs of its
namespace, every class (its queue's history); with fewer than `LEAST` there either, the
end is unknown. Why these and not others: docs/benchmarks.md (predicted starts).

Kept in the cluster by the leader beside the fair share (`remembering`), and read back
when a leader starts. Pure."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from webhook.controller.core.placement.survival import Survival, median_beyond, survival
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.records import dump_memory, load_memory
from webhook.keys import CLASS_LABEL

# Run times kept per namespace and class: the most recent gangs that succeeded.
WINDOW = 20
# Runs seen before an estimate is trusted: the longest of one or two is a guess.
LEAST = 5
# Keyed (namespace, class); a pod without a class label is of class "".
Key = tuple[str, str]


def key_of(pod: PodInfo) -> Key:
    return pod.namespace, pod.labels.get(CLASS_LABEL, "")


@dataclass(frozen=True, slots=True)
class Runtimes:
    """Recent run times of gangs that succeeded, oldest first, per (namespace, class)."""

    seen: Mapping[Key, tuple[float, ...]] = field(default_factory=dict)
    # Of the recent gangs that stated a run time: what they ran over what they stated.
    ratios: Mapping[Key, tuple[float, ...]] = field(default_factory=dict)
    # Each key's estimate once asked: every round asks it of every unit that waits and
    # of every pod on the head's room, and these run times change only by `learned`,
    # which makes new ones.
    _estimates: dict[Key, float | None] = field(default_factory=dict, init=False,
                                                repr=False, compare=False)
    # How long the units that state no run time have run so far, those still running
    # (a forecast's, `running`): what `typical` expects counts them as runs that last
    # at least that long. Not kept: the cluster shows them.
    going: Mapping[Key, tuple[float, ...]] = field(default_factory=dict)
    # The survival `typical` reads, per (namespace, class), or per namespace (its
    # fallback), once asked: asked per running pod.
    _survivals: dict[Key | str, Survival | None] = field(default_factory=dict, init=False,
                                                         repr=False, compare=False)

    def learned(self, key: Key, seconds: float, stated: float | None = None) -> Runtimes:
        """These run times and one more of `key`, which stated `stated` (None: nothing),
        the oldest beyond the window dropped."""
        seen = {**self.seen, key: (*self.seen.get(key, ()), seconds)[-WINDOW:]}
        if stated is None or stated <= 0:
            return replace(self, seen=seen)
        ratio = seconds / stated
        return replace(self, seen=seen, ratios={
            **self.ratios, key: (*self.ratios.get(key, ()), ratio)[-WINDOW:]})

    def estimate(self, key: Key) -> float | None:
        """The learned run time of `key`, None before `LEAST` of it succeeded."""
        try:
            return self._estimates[key]
        except KeyError:
            runs = self.seen.get(key, ())
            found = self._estimates[key] = max(runs) if len(runs) >= LEAST else None
            return found

    def expected(self, pods: Sequence[PodInfo]) -> float | None:
        """How long `pods` (one unit) are expected to run: the longest any states, else
        what their namespace and class learned."""
        if not pods:
            return None
        return self.expected_of(max((r for p in pods if (r := p.marks.runtime) is not None),
                                    default=None), pods[0])

    def expected_of(self, stated: float | None, first: PodInfo) -> float | None:
        """`expected` of a unit whose pods state at most `stated` (None: none states
        one), its first pod `first`."""
        return stated if stated is not None else self.estimate(key_of(first))

    def typical(self, pods: Sequence[PodInfo], ran: float = 0.0) -> float | None:
        """How long `pods` (one unit), which ran `ran` seconds so far, typically run in
        all, for a forecast rather than a promise (`estimate`, the longest, keeps
        backfills safe; a forecast with it would be late for most). Of the runs their
        namespace and class learned, those that lasted longer than `ran`, the median:
        as what they ran of what they stated, times the longest any of `pods` states,
        when one states a time (the time stated as it is until `LEAST` such runs are
        known); else of their run times, or, before `LEAST` of their class succeeded,
        of all their namespace's (its queue's history: a forecast of an end that is
        only expected, never a promise); the units still `going` counted as runs that
        last at least as long as they ran so far (`survival`). When nothing learned or
        stated lasts longer than `ran`: `as_long_again`."""
        if not pods:
            return None
        key = key_of(pods[0])
        stated = max((r for p in pods if (r := p.marks.runtime) is not None), default=None)
        if stated is not None:
            ratios = self.ratios.get(key, ())
            found = stated if len(ratios) < LEAST or stated <= 0 else _beyond(ratios, ran,
                                                                              stated)
        else:
            survived = self._survival(key)
            if survived is None:
                return None
            found = median_beyond(survived, ran)
        return found if found > ran else as_long_again(ran, stated)

    def running(self, going: Mapping[Key, tuple[float, ...]]) -> Runtimes:
        """These run times, with units stating no time running for `going` seconds so
        far, per (namespace, class)."""
        return replace(self, going=going)

    def _survival(self, key: Key) -> Survival | None:
        """The survival of `key`'s runs, else (fewer than `LEAST` ended) of all its
        namespace's, else None."""
        try:
            return self._survivals[key]
        except KeyError:
            pass
        runs = self.seen.get(key, ())
        if len(runs) >= LEAST:
            found: Survival | None = survival(runs, self.going.get(key, ()))
        else:
            namespace = key[0]
            if namespace not in self._survivals:
                pairs = [k for k in sorted(self.seen.keys() | self.going.keys())
                         if k[0] == namespace]
                runs = tuple(t for k in pairs for t in self.seen.get(k, ()))
                self._survivals[namespace] = None if len(runs) < LEAST else survival(
                    runs, [t for k in pairs for t in self.going.get(k, ())])
            found = self._survivals[namespace]
        self._survivals[key] = found
        return found

    def dumps(self) -> str:
        return dump_memory("runtimes", {"seen": [
            {"namespace": n, "class": c, "seconds": list(runs),
             "ratios": list(self.ratios.get((n, c), ()))}
            for (n, c), runs in sorted(self.seen.items())]})

    @classmethod
    def loads(cls, text: str) -> Runtimes:
        """What a former leader kept; nothing learned when it is not readable (nothing
        is then backfilled on an estimate until gangs succeed again). Estimates an earlier
        version kept per queue are not carried over: they mixed namespaces; one kept
        without ratios (an earlier version) has learned none."""
        raw = load_memory("runtimes", text, legacy=lambda _: {})
        try:
            entries = [((str(e["namespace"]), str(e["class"])), e)
                       for e in (raw or {}).get("seen", ()) if "namespace" in e]
            return cls({k: tuple(float(s) for s in e["seconds"])[-WINDOW:] for k, e in entries},
                       {k: tuple(float(r) for r in e["ratios"])[-WINDOW:]
                        for k, e in entries if e.get("ratios")})
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls()


def as_long_again(ran: float, stated: float | None) -> float:
    """The run time of a unit that ran `ran` seconds, longer than anything learned of its
    kind says it should: as long again. With nothing known beyond its age, what is left
    of it is as likely shorter than that age as longer. Ending it now, as before, was sure
    to be early, and so was the prediction of what waits behind it (docs/benchmarks.md,
    predicted starts). A time it states that is still ahead caps it."""
    return min(2 * ran, stated) if stated is not None and stated > ran else 2 * ran


def _beyond(runs: tuple[float, ...], ran: float, scale: float = 1.0) -> float:
    """The median of `runs` (each times `scale`, > 0) that lasted longer than `ran`, else
    `ran`. Asked for each of tens of thousands of running pods per forecast: the runs are
    sorted once per window."""
    ordered = _ordered(runs)
    first = bisect.bisect_right(ordered, ran / scale)
    if first == len(ordered):
        return ran
    # The median of the sorted tail, without sorting it again.
    half, odd = divmod(len(ordered) - first, 2)
    middle = ordered[first + half] if odd else (ordered[first + half - 1]
                                                + ordered[first + half]) / 2
    return scale * middle


@functools.lru_cache(maxsize=256)
def _ordered(runs: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(sorted(runs))
