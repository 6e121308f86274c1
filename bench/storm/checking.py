"""What the failure policy promises of a storm (docs/operations.md, "Failure policy"), held
or broken, with the counts behind each verdict.

- The webhook up throughout: every pod is stored, with Airlock's marks, and no call to
  the webhook failed.
- Restarted, under `Ignore` (as shipped): creation goes on, so every pod is stored; the
  pods created while it was down are stored without Airlock's marks, and each of them is
  counted, as one of the mutating webhook's fail-opens. There may be more fail-opens than
  unmarked pods: the apiserver calls mutation a second time on a pod Airlock marked
  (`reinvocationPolicy: IfNeeded`) when its own plugins changed the pod again, e.g. the
  Priority plugin filling in a `spec.priority` the webhook could not write (its
  PriorityClass watch not listed yet: docs/admission.md, "One call per pod"), and a
  second call that fails open leaves the first call's marks.
- Restarted, under `Fail`: no GPU pod is stored without Airlock's marks; the creations
  refused meanwhile (the apiserver's rejections) are retried by the controllers, so every
  pod exists in the end.

Under all three, no pod carries half of the marks: one mutation writes them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.storm.figures import Errors
from bench.storm.storming import Run, Settings

MUTATE = "mutate.gpu-airlock.io"


@dataclass(frozen=True, slots=True)
class Promise:
    """One promise, held or broken, and the counts behind the verdict."""

    what: str
    held: bool
    counts: str


def promises(run: Run, settings: Settings, errors: Errors) -> list[Promise]:
    marks = run.marks()
    stored = Promise(f"all {settings.pods} pods stored (waited up to {settings.wait:g} s)",
                     run.complete, f"{len(run.pods)} stored")
    whole = Promise("no pod half-marked", marks["partial"] == 0,
                    f"{marks['partial']} half-marked")
    unmarked = marks["unmarked"]
    if not settings.restart:
        return [stored, Promise("every GPU pod marked, no webhook call failed",
                                unmarked == 0 and errors.failed() == 0,
                                f"{unmarked} unmarked, {errors.failed()} calls failed"),
                whole]
    if settings.failure_policy == "Ignore":
        fail_open = errors.of(errors.fail_open, MUTATE)
        again = (f" ({fail_open - unmarked} of them second calls on pods the first had "
                 "marked)" if fail_open > unmarked else "")
        return [stored, Promise("every pod admitted unmarked is counted as a fail-open of "
                                "the mutating webhook", unmarked <= fail_open,
                                f"{unmarked} admitted unmarked, {fail_open} fail-opens{again}"),
                whole]
    # Mutation is called first: a creation is refused by one webhook or the other.
    refused = round(sum(errors.rejections.values()))
    events = sum(run.failed_creates.values())
    return [Promise("no GPU pod stored without Airlock's marks", unmarked == 0,
                    f"{unmarked} unmarked; {refused} creations refused "
                    f"({events} FailedCreate Events)"),
            Promise(f"refused creations retried: all {settings.pods} pods exist "
                    f"(waited up to {settings.wait:g} s)", run.complete,
                    f"{len(run.pods)} stored"),
            whole]
