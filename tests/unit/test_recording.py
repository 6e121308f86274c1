"""The lifecycle log and `airlock record`'s pure parts: the events a gang's pods bring
about, their log lines read back, folded into a trace `simulate` reads, a hostile log
refused at its line, and a live cluster's nodes grouped into pools."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.builders import NOW, POLICY_DEFAULT, SEAL, iso, model_node, node, raw_member
from tests.commands import airlock
from webhook.controller.core.identities import UnitId
from webhook.controller.core.lifecycle import LIFECYCLE_LOGGER, Lifecycle, LifeEvent
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.controller.shells.cache import Cache
from webhook.keys import CLASS_LABEL
from webhook.logs import JsonFormatter
from webhook.pools import CLIQUE_LABEL, PRODUCT_LABEL, PoolError
from webhook.recording.folding import RecordError, fold, parse_log, trace_lines
from webhook.recording.pooling import pools_of_nodes
from webhook.simulation.traces import parse_job

COUNT = POLICY_DEFAULT.count
GANG = UnitId("gang", "ml", "train")


def _pod(i: int, *, gated: bool = False, node_name: str | None = None,
         phase: str | None = None, started: float | None = None, cls: str = "training",
         evicted: str | None = None) -> PodInfo:
    raw = raw_member("train", i, 4, 2, gated=gated, node_name=node_name)
    raw["metadata"]["labels"][CLASS_LABEL] = cls
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if started is not None:
        status["startTime"] = iso(started)
    if evicted:
        raw["metadata"]["deletionTimestamp"] = iso(NOW)
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                 "message": evicted}]
    raw["status"] = status
    return PodInfo.parse(raw)


def _lifecycle() -> Lifecycle:
    return Lifecycle(COUNT, lambda name: "h100" if name.startswith("h100") else None)


def _lived(lifecycle: Lifecycle, *steps: tuple[PodInfo, float]) -> list[LifeEvent]:
    return [e for pod, at in steps for e in lifecycle.put(pod, at)]


def test_a_gang_is_admitted_started_and_ended_with_its_model_and_run_time() -> None:
    lifecycle = _lifecycle()
    events = _lived(lifecycle, (_pod(0, gated=True), NOW), (_pod(1, gated=True), NOW),
                    (_pod(0, node_name="h100-1"), NOW + 5), (_pod(1, node_name="h100-2"), NOW + 5),
                    (_pod(0, node_name="h100-1", phase="Running", started=NOW + 6), NOW + 6),
                    (_pod(1, node_name="h100-2", phase="Running", started=NOW + 7), NOW + 7),
                    (_pod(0, node_name="h100-1", phase="Succeeded", started=NOW + 6),
                     NOW + 60),
                    (_pod(1, node_name="h100-2", phase="Succeeded", started=NOW + 7),
                     NOW + 67.5))
    assert [(e.event, e.at) for e in events] == [
        ("admitted", NOW + 5), ("started", NOW + 7), ("ended", NOW + 67.5)]
    ended = events[-1].fields()
    assert ended == {"event": "ended", "namespace": "ml", "unit": "train", "unitKind": "gang",
                     "class": "training", "pods": 2, "gpus": 4, "model": "h100",
                     "submitTime": ended["submitTime"], "startTime": NOW + 7,
                     "endTime": NOW + 67.5, "runtime": 60.5, "reason": "Succeeded"}
    # Its pods gone, nothing more is said, and nothing is kept.
    assert lifecycle.drop(_pod(0).key, NOW + 70) == []
    assert lifecycle.drop(_pod(1).key, NOW + 70) == []
    assert lifecycle.units == {}


def test_a_preempted_gang_is_told_once_and_starts_again_with_new_pods() -> None:
    lifecycle = _lifecycle()
    running = [(_pod(i, node_name=f"h100-{i}", phase="Running", started=NOW), NOW)
               for i in range(2)]
    evicted = [(_pod(i, node_name=f"h100-{i}", phase="Running", started=NOW,
                     evicted="Preempted: by ml/serve"), NOW + 30) for i in range(2)]
    events = _lived(lifecycle, *running, *evicted)
    assert [(e.event, e.reason) for e in events] == [
        ("started", None), ("preempted", "Preempted: by ml/serve")]
    assert events[1].fields()["runtime"] == 30
    for i in range(2):
        assert lifecycle.drop(_pod(i).key, NOW + 31) == []
    again = _lived(lifecycle, *[(_pod(i, node_name=f"h100-{i}", phase="Running",
                                     started=NOW + 40), NOW + 40) for i in range(2)])
    assert [e.event for e in again] == ["started"]


def test_pods_without_a_class_or_gpus_or_already_ended_are_not_followed() -> None:
    lifecycle = _lifecycle()
    raw = raw_member("cpu", 0, 0, 1, gated=False)
    assert lifecycle.put(PodInfo.parse(raw), NOW) == []
    unclassed = raw_member("plain", 0, 8, 1, gated=False)
    assert lifecycle.put(PodInfo.parse(unclassed), NOW) == []
    assert lifecycle.put(_pod(0, phase="Succeeded", started=NOW), NOW) == []
    assert lifecycle.units == {}


def _logged(events: list[LifeEvent]) -> str:
    """The events as the controller's log has them, among its other lines."""
    formatter = JsonFormatter()
    lines = ["not JSON at all\n", '{"logger": "airlock.controller", "msg": "leading"}\n']
    for event in events:
        record = logging.LogRecord(LIFECYCLE_LOGGER, logging.INFO, "", 0, event.event, (),
                                   None)
        record.__dict__.update(event.fields())
        lines.append(formatter.format(record) + "\n")
    return "".join(lines)


def _event(event: str, at: float, unit: UnitId = GANG, started: float | None = None,
           model: str | None = "h100") -> LifeEvent:
    return LifeEvent(event, unit, "training", 2, 4, model, NOW, at, started)  # type: ignore[arg-type]


def test_the_log_read_back_folds_into_a_trace_simulate_reads() -> None:
    single = UnitId("pod", "ml", "Notebook.0")
    waiting = UnitId("pod", "ml", "waits")
    events = [_event("admitted", NOW + 5), _event("started", NOW + 10),
              _event("ended", NOW + 70, started=NOW + 10),
              _event("started", NOW + 20, single, model="l4"),
              _event("admitted", NOW + 30, waiting)]
    read = list(parse_log(io.StringIO(_logged(events)), "controller.log"))
    assert read == [LifeEvent(e.event, e.unit, e.cls, e.pods, e.gpus, e.model, e.submitted,
                              e.at, e.started if e.event == "ended" else None)
                    for e in events]
    runs, until = fold(read)
    assert until == NOW + 70
    lines = list(trace_lines(runs, until))
    jobs = [json.loads(line) for line in lines if not line.startswith("#")]
    assert jobs == [
        {"name": "train", "submit": 0, "namespace": "ml", "class": "training", "pods": 2,
         "gpus": 4, "runtime": 60, "gpuModels": ["h100"]},
        {"name": "notebook-0", "submit": 0, "namespace": "ml", "class": "training",
         "pods": 2, "gpus": 4, "runtime": 50, "gpuModels": ["l4"]}]
    assert [line for line in lines if line.startswith("#")] == [
        "# still running when the recording ended: ml/Notebook.0 (training, 2 x 4 GPUs, "
        "submitted at 0 s); its runtime is what it had run\n",
        "# never started while recorded: ml/waits (training, 2 x 4 GPUs, submitted at 0 s)\n"]
    for job in jobs:
        del job["gpuModels"]  # the simulation's own reading of models is not this test's
        parse_job(json.dumps(job))


@pytest.mark.parametrize(("line", "message"), [
    ('{"logger": "airlock.lifecycle", "event": "started"', "not JSON"),
    ('{"logger": "airlock.lifecycle", "event": "ran"}', "event 'ran' is not one of"),
    ('{"logger": "airlock.lifecycle", "event": "started", "unitKind": "job"}',
     "unitKind 'job' is not gang or pod"),
    ('{"logger": "airlock.lifecycle", "event": "started", "unitKind": "pod", '
     '"namespace": "ml", "unit": "a", "class": "training", "pods": 1, "gpus": -1}',
     "gpus must be a number from 0 to 1024, not '-1'"),
    ('{"logger": "airlock.lifecycle", "event": "started", "unitKind": "pod", '
     '"namespace": "ml", "unit": "a", "class": "training", "pods": 1, "gpus": 1, '
     '"submitTime": 1, "startTime": "soon"}', "startTime must be a number"),
    ('{"logger": "airlock.lifecycle", "unit": "' + "x" * 20_000 + '"}',
     "a line of 16,384 characters or more"),
])
def test_a_bad_lifecycle_line_stops_the_reading_at_its_line(line: str, message: str) -> None:
    log = _logged([_event("started", NOW)]) + line + "\n"
    with pytest.raises(RecordError) as raised:
        list(parse_log(io.StringIO(log), "controller.log"))
    assert str(raised.value).startswith("controller.log:4: ")
    assert message in str(raised.value)


def test_nodes_alike_make_one_pool_with_their_domains_and_blocks() -> None:
    h100 = [NodeInfo(**{**vars_of(node(f"h100-{i}", f"clique-{i // 4}")),
                        "labels": {PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3",
                                   CLIQUE_LABEL: f"clique-{i // 4}",
                                   "cloud.google.com/gce-topology-block": "block-0"}})
            for i in range(8)]
    l4 = [model_node(f"l4-{i}", "l4", 1) for i in range(3)]
    odd = [NodeInfo(**{**vars_of(node("mystery", None, gpus=2)), "labels": {}})]
    cpu = [NodeInfo(**{**vars_of(node("cpu", None, gpus=0)), "labels": {}})]
    pools = pools_of_nodes([*h100, *l4, *odd, *cpu], "the nodes of kubeconfig")
    assert [(p.name, p.product, p.count, p.gpus_per_node, p.nodes_per_domain,
             p.domains_per_block) for p in pools] == [
        ("h100", "NVIDIA-H100-80GB-HBM3", 8, 8, 4, 2),
        ("l4", "NVIDIA-L4", 3, 1, None, 1),
        ("unknown-gpu", "unknown-gpu", 1, 2, None, 1)]


def vars_of(info: NodeInfo) -> dict[str, Any]:
    return {f: getattr(info, f) for f in info.__dataclass_fields__}


def _raw(i: int, **status: Any) -> dict[str, Any]:
    raw = raw_member("train", i, 4, 2, gated=False, node_name=f"h100-{i}")
    raw["metadata"]["labels"][CLASS_LABEL] = "training"
    raw["status"] = status
    return raw


def test_only_the_leader_logs_each_event_once(caplog: pytest.LogCaptureFixture) -> None:
    cache = Cache(POLICY_DEFAULT, SEAL)
    cache.list_nodes([NodeInfo(**{**vars_of(node(f"h100-{i}", "clique-0")),
                                  "labels": {PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}})
                      for i in range(2)])
    caplog.set_level(logging.INFO, logger=LIFECYCLE_LOGGER)
    cache.stored(_raw(0, phase="Running", startTime=iso(NOW)))
    cache.telling = True  # the replica took the lead
    cache.stored(_raw(1, phase="Running", startTime=iso(NOW + 1)))
    for i in range(2):
        cache.stored(_raw(i, phase="Succeeded", startTime=iso(NOW + i)))
    logged = [(r.getMessage(), r.__dict__["model"], r.__dict__.get("startTime"))
              for r in caplog.records if r.name == LIFECYCLE_LOGGER]
    assert logged == [("started", "h100", NOW + 1), ("ended", "h100", NOW + 1)]


def test_record_says_where_a_log_is_wrong(tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    log.write_text(_logged([_event("started", NOW)]) +
                   '{"logger": "airlock.lifecycle", "event": "started", "unitKind": "pod"}\n')
    done = airlock("record", "--from-log", str(log))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.endswith(f"{log}:4: namespace must be text of 1 to 253 characters, "
                                "not 'None'\n"), done.stderr


def test_a_cluster_without_gpus_makes_no_pools() -> None:
    with pytest.raises(PoolError) as raised:
        pools_of_nodes([node("cpu-0", None, gpus=0)], "the nodes of kubeconfig")
    assert str(raised.value) == "the nodes of kubeconfig: no node has allocatable " \
        "nvidia.com/gpu: no pool to simulate"


def test_simulate_names_the_kubeconfig_whose_context_it_lacks(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}))
    done = airlock("simulate", "--trace", str(tmp_path / "unread.jsonl"),
                   "--cluster-from", str(kubeconfig), "--context", "elsewhere")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"{kubeconfig}: cannot list the cluster's nodes: "), \
        done.stderr
    assert "elsewhere" in done.stderr


def test_what_the_simulation_cannot_replay_is_said_and_left_out() -> None:
    long = UnitId("pod", "n" * 51, "a")
    runs, until = fold([
        LifeEvent("ended", long, "training", 1, 1, None, NOW, NOW + 9, NOW),
        LifeEvent("ended", UnitId("pod", "ml", "b"), "batch", 1, 0.5, None, NOW, NOW + 9,
                  NOW),
        LifeEvent("ended", UnitId("pod", "ml", "c"), "scavenger", 1, 0.5, None, NOW, NOW + 9,
                  NOW)])
    lines = list(trace_lines(runs, until))
    assert [line for line in lines if line.startswith("#")] == [
        "# not replayable: ml/b (batch, 1 x 0.5 GPUs, submitted at 0 s): class 'batch' is "
        "not one the simulation knows\n",
        f"# not replayable: {long.path} (training, 1 x 1 GPUs, submitted at 0 s): a trace's "
        "namespace has at most 50 characters\n"]
    # Half a GPU asked for is a whole one replayed.
    assert [parse_job(line).need for line in lines if not line.startswith("#")] == [1]
