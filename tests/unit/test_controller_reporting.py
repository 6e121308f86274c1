"""`airlock status`'s report, from a listing: queues, waiting gangs in order with why, and
recent preemptions."""

from __future__ import annotations

from tests.builders import NOW, cluster, gang, queued, running, tracked
from webhook.controller.core.queues.accounting import FAIR_SHARE_KEY
from webhook.controller.core.reporting import report
from webhook.policy.model import Policy
from webhook.policy.queues import Queue


def test_the_report_says_where_queues_stand_and_why_gangs_wait(policy: Policy) -> None:
    teams = policy.model_copy(update={"queues": (
        Queue(name="team-a", namespaces=("team-a",), nominal={"nvidia.com/gpu": 8}),)})
    busy = running("big", ["a-n0", "a-n1"], ns="team-a", priority=100)
    waiting = gang("next", 1, ns="team-a", priority=100) + gang("low", 1, ns="other")
    events = [{"reason": "Preempting", "lastTimestamp": "2030-01-01T00:00:00Z",
               "involvedObject": {"namespace": "ml", "name": f"train-{i}"},
               "message": "Preempting: evicting gang ml/s to make room in domain a"}
              for i in range(2)]
    kept = {FAIR_SHARE_KEY: '{"at": 1900000000.0, "usage": {"team-a": 7200.0}}'}
    found = report(teams, tracked(cluster({"a": 2}), busy + waiting, teams.counted()),
                   events, NOW, kept)
    assert [(q.name, q.nominal, q.used, q.borrowed) for q in found.queues] == [
        ("default", 0, 0, 0), ("team-a", 8, 16, 8)]
    assert [(g.gang, g.queue) for g in found.waiting] == [("team-a/next", "team-a"),
                                                         ("other/low", "default")]
    assert found.waiting[0].why.startswith("Waiting: 1/1 pods present; needs 8 GPUs")
    assert [g.reason for g in found.waiting] == ["NoDomainFits", "NoDomainFits"]
    assert found.as_json()["waiting"][0]["reason"] == "NoDomainFits"
    (preemption,) = found.preemptions
    assert preemption.preemptor == "ml/train-0"
    assert found.as_json()["queues"][1]["borrowed"] == 8
    assert [q.share for q in found.queues] == [0.0, 7200.0]
    assert "team-a                 8    16         8       1                 2.0" in \
        found.text()
    assert "team-a/next  queue team-a, priority 100, 1 pods, 8 GPUs: Waiting" in found.text()


def test_a_waiting_single_pod_is_shown_as_a_pod(policy: Policy) -> None:
    found = report(policy, tracked(cluster({"a": 1}), [*running("big", ["a-n0"]),
                                                        queued("solo", 2, ns="team-a")]),
                   [], NOW, {})
    (line,) = found.waiting
    assert (line.gang, line.pods, line.gpus) == ("pod team-a/solo", 1, 2.0)
    assert line.why == "Waiting: needs 2 GPUs on eligible nodes; 0 free"
