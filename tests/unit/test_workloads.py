"""Each workload kind expands into the pods its controller makes at the pinned versions
(each operator's `making`, gathered by the registry): names, labels, annotations and
owners (table-driven, one row per behaviour, a name row per kind), and malformed objects
are refused at the field that is wrong."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.builders import make_policy, replica_specs, template, workload
from webhook.operators.registry import EXPANSIONS, supported
from webhook.operators.sizing import owner_size
from webhook.workloads.documents import parse_documents
from webhook.workloads.expansions import Context, Expansion
from webhook.workloads.kinds import group_kind
from webhook.workloads.objects import WorkloadError, dotted

CTX = Context(now=datetime(2026, 11, 23, 17, 30, 42, tzinfo=UTC))
MINUTE = int(datetime(2026, 11, 23, 17, 30, tzinfo=UTC).timestamp()) // 60
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
TRAINING = "training.kubeflow.org/"
LWS = "leaderworkerset.sigs.k8s.io/"
JOBSET = "jobset.sigs.k8s.io/"


def expand(obj: Mapping[str, Any]) -> Expansion:
    return EXPANSIONS[group_kind(obj)](obj, CTX)


def pods(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [g.make(i) for g in expand(obj).groups for i in range(g.count)]


def name(pod: Mapping[str, Any]) -> str:
    """The pod's name, or its generateName and `~` where the apiserver adds five."""
    meta = pod["metadata"]
    return str(meta.get("name") or meta["generateName"] + "~")


def labels(pod: Mapping[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"]["labels"])


def owner(pod: Mapping[str, Any]) -> str:
    (ref,) = pod["metadata"]["ownerReferences"]
    assert ref["controller"] is True
    return f"{ref['kind']}/{ref['name']}"


def _job(**spec: Any) -> dict[str, Any]:
    return workload("batch/v1", "Job", "train", **spec)


# (object, pod names, a few (label, value) every pod or the named pod carries, owner)
NAMES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "pod": (workload("v1", "Pod", "solo", containers=[{"name": "c", "image": "i"}]),
            ["solo"]),
    "replicaset": (workload("apps/v1", "ReplicaSet", "web", replicas=2, template=template()),
                   ["web-~", "web-~"]),
    "deployment defaults to 1": (workload("apps/v1", "Deployment", "web", template=template()),
                                 ["web-*-~"]),
    "statefulset ordinals": (
        workload("apps/v1", "StatefulSet", "db", replicas=2, ordinals={"start": 5},
                 template=template()), ["db-5", "db-6"]),
    "daemonset: one pod stands for all": (
        workload("apps/v1", "DaemonSet", "dcgm", template=template()), ["dcgm-~"]),
    "plain job: min(parallelism, completions)": (
        _job(parallelism=3, completions=2, template=template()), ["train-~", "train-~"]),
    "job with no counts: one pod": (_job(template=template()), ["train-~"]),
    "work-queue job: parallelism": (_job(parallelism=3, template=template()),
                                    ["train-~"] * 3),
    "indexed job: the first indexes": (
        _job(completionMode="Indexed", completions=4, parallelism=2, template=template()),
        ["train-0-~", "train-1-~"]),
    "indexed job with a long name": (
        workload("batch/v1", "Job", "x" * 60, completionMode="Indexed", completions=1,
                 template=template()), ["x" * 55 + "-0-~"]),
    "cronjob: the Job of the current minute": (
        workload("batch/v1", "CronJob", "nightly", schedule="0 2 * * *",
                 jobTemplate={"spec": {"template": template()}}), [f"nightly-{MINUTE}-~"]),
    "jobset: jobs of replicated jobs, indexed": (
        workload("jobset.x-k8s.io/v1alpha2", "JobSet", "gpt", replicatedJobs=[
            {"name": "driver", "template": {"spec": {"template": template()}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {
                "parallelism": 2, "completions": 2, "template": template()}}}]),
        ["gpt-driver-0-0-~", "gpt-workers-0-0-~", "gpt-workers-0-1-~",
         "gpt-workers-1-0-~", "gpt-workers-1-1-~"]),
    "pytorchjob": (workload("kubeflow.org/v1", "PyTorchJob", "ft",
                            pytorchReplicaSpecs=replica_specs(Master=1, Worker=2)),
                   ["ft-master-0", "ft-worker-0", "ft-worker-1"]),
    "tfjob": (workload("kubeflow.org/v1", "TFJob", "tf",
                       tfReplicaSpecs=replica_specs(Chief=1, PS=1, Worker=2)),
              ["tf-chief-0", "tf-ps-0", "tf-worker-0", "tf-worker-1"]),
    "xgboostjob": (workload("kubeflow.org/v1", "XGBoostJob", "xgb",
                            xgbReplicaSpecs=replica_specs(Master=1, Worker=1)),
                   ["xgb-master-0", "xgb-worker-0"]),
    "paddlejob": (workload("kubeflow.org/v1", "PaddleJob", "pd",
                           paddleReplicaSpecs=replica_specs(Worker=2)),
                  ["pd-worker-0", "pd-worker-1"]),
    "jaxjob": (workload("kubeflow.org/v1", "JAXJob", "jax",
                        jaxReplicaSpecs=replica_specs(Worker=2)),
               ["jax-worker-0", "jax-worker-1"]),
    "mpijob: launcher and workers": (
        workload("kubeflow.org/v1", "MPIJob", "bert",
                 mpiReplicaSpecs=replica_specs(Launcher=1, Worker=2)),
        ["bert-launcher", "bert-worker-0", "bert-worker-1"]),
    "mpijob workers default to none": (
        workload("kubeflow.org/v1", "MPIJob", "bert", mpiReplicaSpecs={
            "Launcher": {"template": template()}, "Worker": {"template": template()}}),
        ["bert-launcher"]),
    "leaderworkerset: leaders, then workers by group": (
        workload("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm", replicas=2,
                 leaderWorkerTemplate={"size": 3, "workerTemplate": template()}),
        ["llm-0", "llm-1", "llm-0-1", "llm-0-2", "llm-1-1", "llm-1-2"]),
    "leaderworkerset of size 1: leaders only": (
        workload("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm",
                 leaderWorkerTemplate={"workerTemplate": template()}), ["llm-0"]),
    "raycluster: head and replicas x hosts, within min and max": (
        workload("ray.io/v1", "RayCluster", "rc", headGroupSpec={"template": template()},
                 workerGroupSpecs=[
                     {"groupName": "gpu", "replicas": 9, "maxReplicas": 2, "numOfHosts": 2,
                      "template": template()},
                     {"groupName": "small", "minReplicas": 1, "template": template()},
                     {"groupName": "off", "replicas": 3, "suspend": True,
                      "template": template()}]),
        ["rc-head-~", *["rc-gpu-worker-~"] * 4, "rc-small-worker-~"]),
    "rayjob: its cluster and the submitter": (
        workload("ray.io/v1", "RayJob", "tune", rayClusterSpec={
            "headGroupSpec": {"template": template()}}),
        ["tune-*-head-~", "tune-~"]),
    "rayjob on an existing cluster: the submitter only": (
        workload("ray.io/v1", "RayJob", "tune", clusterSelector={"ray.io/cluster": "c"}),
        ["tune-~"]),
    "rayjob in HTTPMode: the cluster only": (
        workload("ray.io/v1", "RayJob", "tune", submissionMode="HTTPMode",
                 rayClusterSpec={"headGroupSpec": {"template": template()}}),
        ["tune-*-head-~"]),
}


@pytest.mark.parametrize("case", NAMES)
def test_pod_names(case: str) -> None:
    obj, expected = NAMES[case]
    got = [name(p) for p in pods(obj)]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert fnmatch.fnmatchcase(g, e), (g, e)


def test_every_kind_has_a_name_row() -> None:
    assert {group_kind(obj) for obj, _ in NAMES.values()} == set(EXPANSIONS)


def test_the_rayjob_cluster_name_has_five_generated_characters() -> None:
    head = pods(NAMES["rayjob: its cluster and the submitter"][0])[0]
    assert head["metadata"]["generateName"].startswith("tune-")
    cluster = head["metadata"]["labels"]["ray.io/cluster"]
    assert len(cluster) == len("tune-") + 5


# (object, index of the pod, labels it carries, annotations it carries, its owner)
METADATA: dict[str, tuple[dict[str, Any], int, dict[str, str], dict[str, str], str]] = {
    "deployment: the template hash": (
        workload("apps/v1", "Deployment", "web", template=template(labels={"app": "web"})), 0,
        {"app": "web"}, {}, "ReplicaSet/web-"),
    "statefulset identity": (
        workload("apps/v1", "StatefulSet", "db", template=template()), 0,
        {"statefulset.kubernetes.io/pod-name": "db-0", "apps.kubernetes.io/pod-index": "0"},
        {}, "StatefulSet/db"),
    "daemonset revision and generation": (
        workload("apps/v1", "DaemonSet", "dcgm", template=template()), 0,
        {"pod-template-generation": "1"}, {}, "DaemonSet/dcgm"),
    "job selector labels": (
        _job(template=template()), 0,
        {"job-name": "train", "batch.kubernetes.io/job-name": "train"}, {}, "Job/train"),
    "indexed job: index as label and annotation": (
        _job(completionMode="Indexed", completions=3, parallelism=3, template=template()), 2,
        {JOB_INDEX: "2", "batch.kubernetes.io/job-name": "train"}, {JOB_INDEX: "2"},
        "Job/train"),
    "cronjob's job": (
        workload("batch/v1", "CronJob", "nightly",
                 jobTemplate={"metadata": {"labels": {"team": "a"}},
                              "spec": {"template": template()}}), 0,
        {"job-name": f"nightly-{MINUTE}"}, {}, f"Job/nightly-{MINUTE}"),
    "jobset keys on pods": (
        NAMES["jobset: jobs of replicated jobs, indexed"][0], 4,
        {f"{JOBSET}jobset-name": "gpt", f"{JOBSET}replicatedjob-name": "workers",
         f"{JOBSET}job-index": "1", f"{JOBSET}job-global-index": "2",
         f"{JOBSET}global-replicas": "3", f"{JOBSET}replicatedjob-replicas": "2",
         f"{JOBSET}group-name": "default", f"{JOBSET}job-group-index": "2",
         f"{JOBSET}restart-attempt": "0", JOB_INDEX: "1",
         "batch.kubernetes.io/job-name": "gpt-workers-1"},
        {f"{JOBSET}jobset-name": "gpt", f"{JOBSET}job-index": "1", JOB_INDEX: "1"},
        "Job/gpt-workers-1"),
    "pytorch master": (
        NAMES["pytorchjob"][0], 0,
        {f"{TRAINING}job-name": "ft", f"{TRAINING}replica-type": "master",
         f"{TRAINING}replica-index": "0", f"{TRAINING}job-role": "master",
         f"{TRAINING}operator-name": "pytorchjob-controller"}, {}, "PyTorchJob/ft"),
    "mpi worker: its index": (
        NAMES["mpijob: launcher and workers"][0], 2,
        {f"{TRAINING}replica-type": "worker", f"{TRAINING}replica-index": "1"}, {},
        "MPIJob/bert"),
    "mpi launcher: master role": (
        NAMES["mpijob: launcher and workers"][0], 0,
        {f"{TRAINING}replica-type": "launcher", f"{TRAINING}job-role": "master",
         f"{TRAINING}operator-name": "mpijob-controller"}, {}, "MPIJob/bert"),
    "lws leader": (
        NAMES["leaderworkerset: leaders, then workers by group"][0], 1,
        {f"{LWS}name": "llm", f"{LWS}group-index": "1", f"{LWS}worker-index": "0"},
        {f"{LWS}size": "3"}, "StatefulSet/llm"),
    "lws worker": (
        NAMES["leaderworkerset: leaders, then workers by group"][0], 5,
        {f"{LWS}name": "llm", f"{LWS}group-index": "1", f"{LWS}worker-index": "2",
         "statefulset.kubernetes.io/pod-name": "llm-1-2"},
        {f"{LWS}size": "3", f"{LWS}leader-name": "llm-1"}, "StatefulSet/llm-1"),
    "ray head": (
        workload("ray.io/v1", "RayCluster", "rc", headGroupSpec={"template": template(
            labels={"ray.io/node-type": "worker", "ray.io/cluster": "x", "team": "a",
                    "app.kubernetes.io/name": "mine"})}), 0,
        {"ray.io/cluster": "rc", "ray.io/node-type": "head", "ray.io/group": "headgroup",
         "ray.io/identifier": "rc-head", "team": "a", "app.kubernetes.io/name": "mine"},
        {"ray.io/ft-enabled": "false"}, "RayCluster/rc"),
    "rayjob submitter": (
        NAMES["rayjob on an existing cluster: the submitter only"][0], 0,
        {"job-name": "tune"}, {}, "Job/tune"),
}


@pytest.mark.parametrize("case", METADATA)
def test_labels_annotations_and_owner(case: str) -> None:
    obj, index, want_labels, want_annotations, want_owner = METADATA[case]
    pod = pods(obj)[index]
    assert labels(pod).items() >= want_labels.items()
    assert pod["metadata"]["annotations"].items() >= want_annotations.items()
    assert owner(pod).startswith(want_owner)


@pytest.mark.parametrize(("kind", "specs", "masters"), [
    ("PyTorchJob", {"Worker": 3}, ["worker-0"]),
    ("TFJob", {"Chief": 1, "Worker": 2}, ["chief-0"]),
    ("TFJob", {"PS": 1, "Worker": 2}, ["worker-0"]),
    ("XGBoostJob", {"Master": 1, "Worker": 1}, ["master-0"]),
    ("PaddleJob", {"Worker": 2}, []),
    ("JAXJob", {"Worker": 2}, ["worker-0"]),
])
def test_master_role_per_kind(kind: str, specs: dict[str, int], masters: list[str]) -> None:
    field = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs",
             "XGBoostJob": "xgbReplicaSpecs", "PaddleJob": "paddleReplicaSpecs",
             "JAXJob": "jaxReplicaSpecs"}[kind]
    got = [p["metadata"]["name"].removeprefix("j-") for p in pods(
        workload("kubeflow.org/v1", kind, "j", **{field: replica_specs(**specs)}))
        if labels(p).get(f"{TRAINING}job-role") == "master"]
    assert got == masters


@pytest.mark.parametrize(("kind", "given", "restart"), [
    ("PyTorchJob", None, "OnFailure"), ("TFJob", None, "Never"),
    ("PyTorchJob", "ExitCode", "Never"), ("TFJob", "Always", "Always"),
])
def test_training_restart_policy(kind: str, given: str | None, restart: str) -> None:
    field = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"
    extra = {"restartPolicy": given} if given else {}
    (pod,) = pods(workload("kubeflow.org/v1", kind, "j",
                           **{field: replica_specs(Worker=(1, extra))}))
    assert pod["spec"]["restartPolicy"] == restart


def test_the_mpi_launcher_has_no_index() -> None:
    launcher = pods(NAMES["mpijob: launcher and workers"][0])[0]
    assert f"{TRAINING}replica-index" not in labels(launcher)


def test_indexed_job_pods_know_their_index() -> None:
    pod = pods(_job(completionMode="Indexed", completions=2, parallelism=2,
                    template=template()))[1]
    assert pod["spec"]["hostname"] == "train-1"
    assert pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    (env,) = pod["spec"]["containers"][0]["env"]
    assert env["name"] == "JOB_COMPLETION_INDEX"


def test_a_manual_selector_leaves_the_labels_alone() -> None:
    (pod,) = pods(_job(manualSelector=True, template=template(labels={"app": "x"})))
    assert labels(pod) == {"app": "x"}


def test_job_labels_the_user_set_are_kept() -> None:
    (pod,) = pods(_job(template=template(labels={"job-name": "mine"})))
    assert labels(pod)["job-name"] == "mine"
    assert labels(pod)["batch.kubernetes.io/job-name"] == "train"


def test_cronjob_scheduled_timestamp_in_its_time_zone() -> None:
    (pod,) = pods(workload("batch/v1", "CronJob", "n", timeZone="Europe/Berlin",
                           jobTemplate={"spec": {"template": template()}}))
    assert "ownerReferences" in pod["metadata"]
    job = expand(workload("batch/v1", "CronJob", "n", timeZone="Europe/Berlin",
                          jobTemplate={"spec": {"template": template()}})).groups[0].owners[1]
    stamp = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    assert stamp == "2026-11-23T18:30:00+01:00"


def test_statefulset_claims_become_volumes() -> None:
    (pod,) = pods(workload("apps/v1", "StatefulSet", "db", serviceName="db-svc",
                           template=template(volumes=[{"name": "scratch", "emptyDir": {}}]),
                           volumeClaimTemplates=[{"metadata": {"name": "data"}}]))
    assert pod["metadata"]["name"] == "db-0"
    assert pod["metadata"]["generateName"] == "db-"  # set before the pod is named
    assert pod["spec"]["hostname"] == "db-0"
    assert pod["spec"]["subdomain"] == "db-svc"
    assert pod["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
        {"name": "scratch", "emptyDir": {}}]


def test_jobset_defaults_and_exclusive_placement() -> None:
    obj = workload("jobset.x-k8s.io/v1alpha2", "JobSet", "gpt", replicatedJobs=[
        {"name": "w", "template": {
            "metadata": {"annotations": {
                "alpha.jobset.sigs.k8s.io/exclusive-topology": "rack",
                "alpha.jobset.sigs.k8s.io/node-selector": "true"}},
            "spec": {"template": template()}}}])
    (pod,) = pods(obj)
    spec = pod["spec"]
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["subdomain"] == "gpt"
    assert spec["nodeSelector"] == {"alpha.jobset.sigs.k8s.io/namespaced-job": "ml_gpt-w-0"}
    assert spec["tolerations"][0]["key"] == "alpha.jobset.sigs.k8s.io/no-schedule"
    assert owner(pod) == "Job/gpt-w-0"


def test_lws_environment_and_unique_subdomains() -> None:
    obj = workload("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm",
                   networkConfig={"subdomainPolicy": "UniquePerReplica"},
                   leaderWorkerTemplate={"size": 2, "workerTemplate": template()})
    leader, worker = pods(obj)
    assert leader["spec"]["subdomain"] == "llm-0"
    assert worker["spec"]["subdomain"] == "llm-0"
    env = {e["name"]: e["value"] for e in worker["spec"]["containers"][0]["env"]}
    assert env == {"LWS_LEADER_ADDRESS": "llm-0.llm-0.ml", "LWS_GROUP_SIZE": "2",
                   "LWS_WORKER_INDEX": "1"}
    assert labels(leader)[f"{LWS}group-key"] == labels(worker)[f"{LWS}group-key"]


def test_a_thousand_replicas_cost_nothing_until_asked() -> None:
    obj = workload("jobset.x-k8s.io/v1alpha2", "JobSet", "big", replicatedJobs=[
        {"name": "w", "replicas": 1000, "template": {"spec": {
            "parallelism": 1000, "completions": 1000, "template": template()}}}])
    (group,) = expand(obj).groups
    assert group.count == 1_000_000
    assert [name(p) for p in group.pods(2)] == ["big-w-0-0-~", "big-w-0-1-~"]
    assert name(group.make(999_999)) == "big-w-999-999-~"


# (object, the field the error names, words in the message)
ERRORS: dict[str, tuple[dict[str, Any], str, str]] = {
    "no template": (workload("apps/v1", "Deployment", "web", replicas=1), "spec.template",
                    "pod template is required"),
    "replicas not a number": (workload("apps/v1", "Deployment", "web", replicas="3",
                                       template=template()), "spec.replicas", "not a number"),
    "negative replicas": (workload("apps/v1", "StatefulSet", "db", replicas=-1,
                                   template=template()), "spec.replicas", "negative"),
    "template without a spec": (workload("apps/v1", "ReplicaSet", "r", template={}),
                                "spec.template.spec", "pod spec"),
    "indexed job without completions": (
        _job(completionMode="Indexed", parallelism=2, template=template()),
        "spec.completions", "needs completions"),
    "cronjob's job, at the cronjob's field": (
        workload("batch/v1", "CronJob", "n", jobTemplate={"spec": {
            "parallelism": "x", "template": template()}}),
        "spec.jobTemplate.spec.parallelism", "not a number"),
    "unknown time zone": (workload("batch/v1", "CronJob", "n", timeZone="Mars/Olympus",
                                   jobTemplate={"spec": {"template": template()}}),
                          "spec.timeZone", "unknown time zone"),
    "jobset without replicated jobs": (workload("jobset.x-k8s.io/v1alpha2", "JobSet", "j"),
                                       "spec.replicatedJobs", "no replicated jobs"),
    "jobset replicated job without a pod template": (
        workload("jobset.x-k8s.io/v1alpha2", "JobSet", "j", replicatedJobs=[
            {"name": "w", "template": {"spec": {}}}]),
        "spec.replicatedJobs[0].template.spec.template", "pod template"),
    "training job without replica specs": (workload("kubeflow.org/v1", "PyTorchJob", "p"),
                                           "spec.pytorchReplicaSpecs", "no replica specs"),
    "mpijob with a stray replica type": (
        workload("kubeflow.org/v1", "MPIJob", "m", mpiReplicaSpecs=replica_specs(Server=1)),
        "spec.mpiReplicaSpecs.Server", "only Launcher and Worker"),
    "lws of size 0": (workload("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "l",
                               leaderWorkerTemplate={"size": 0, "workerTemplate": template()}),
                      "spec.leaderWorkerTemplate.size", "at least 1"),
    "lws without a worker template": (
        workload("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "l",
                 leaderWorkerTemplate={"size": 2}),
        "spec.leaderWorkerTemplate.workerTemplate", "pod template"),
    "raycluster without a head": (workload("ray.io/v1", "RayCluster", "r"),
                                  "spec.headGroupSpec", "head group"),
    "ray worker group without a name": (
        workload("ray.io/v1", "RayCluster", "r", headGroupSpec={"template": template()},
                 workerGroupSpecs=[{"template": template()}]),
        "spec.workerGroupSpecs[0].groupName", "needs a name"),
    "rayjob's cluster, at the rayjob's field": (
        workload("ray.io/v1", "RayJob", "r", rayClusterSpec={"headGroupSpec": {}}),
        "spec.rayClusterSpec.headGroupSpec.template", "pod template"),
    "no name": ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}},
                "metadata.name", "needs a name"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_malformed_objects_name_the_field(case: str) -> None:
    obj, field, words = ERRORS[case]
    with pytest.raises(WorkloadError) as e:
        expand(obj)
    assert dotted(e.value.path) == field
    assert words in str(e.value)


def test_every_kind_the_issue_names_is_supported() -> None:
    assert set(supported()) >= {
        "Pod", "Deployment.apps", "ReplicaSet.apps", "StatefulSet.apps", "DaemonSet.apps",
        "Job.batch",
        "CronJob.batch", "JobSet.jobset.x-k8s.io", "PyTorchJob.kubeflow.org",
        "TFJob.kubeflow.org", "MPIJob.kubeflow.org", "XGBoostJob.kubeflow.org",
        "PaddleJob.kubeflow.org", "JAXJob.kubeflow.org",
        "LeaderWorkerSet.leaderworkerset.x-k8s.io", "RayCluster.ray.io", "RayJob.ray.io"}


def test_documents_know_their_lines() -> None:
    text = ("# a comment\napiVersion: v1\nkind: Service\n---\n\napiVersion: apps/v1\n"
            "kind: Deployment\nspec:\n  replicas: x\n---\nkind: List\nitems:\n"
            "- {kind: A}\n- kind: B\n")
    docs = list(parse_documents(text))
    assert [d.line for d in docs] == [2, 6, 13, 14]
    assert docs[1].line_of(("spec", "replicas")) == 9
    assert docs[1].line_of(("spec", "template")) == 8


@pytest.mark.parametrize("obj", [
    _job(suspend=True, template=template()),
    workload("jobset.x-k8s.io/v1alpha2", "JobSet", "j", suspend=True, replicatedJobs=[
        {"name": "w", "template": {"spec": {"template": template()}}}]),
    workload("ray.io/v1", "RayCluster", "r", suspend=True,
             headGroupSpec={"template": template()}),
], ids=["job", "jobset", "raycluster"])
def test_a_suspended_workload_is_shown_with_a_note(obj: dict[str, Any]) -> None:
    expansion = expand(obj)
    assert expansion.count == 1
    assert any(note.startswith("suspended") for note in expansion.notes)


def test_daemon_pods_tolerate_node_conditions_and_are_pinned_to_their_node() -> None:
    (pod,) = pods(workload("apps/v1", "DaemonSet", "d", template=template(
        hostNetwork=True,
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                      "effect": "NoExecute", "tolerationSeconds": 5}],
        affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}})))
    spec = pod["spec"]
    keys = [t["key"] for t in spec["tolerations"]]
    assert keys.count("node.kubernetes.io/not-ready") == 1
    assert spec["tolerations"][0]["tolerationSeconds"] == 5
    assert "node.kubernetes.io/network-unavailable" in keys
    assert len(keys) == 7
    node_affinity = spec["affinity"]["nodeAffinity"]
    (term,) = node_affinity["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term["matchFields"][0]["key"] == "metadata.name"
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [{"weight": 1}]


def test_a_gang_size_is_read_off_the_owner_of_the_right_kind() -> None:
    job = _job(completionMode="Indexed", completions=6, parallelism=3, template=template())
    cron = workload("batch/v1", "CronJob", "train", jobTemplate={"spec": {"parallelism": 9}})
    pod = pods(job)[0]
    joins = make_policy().counted().joins
    assert owner_size("indexed-job", pod, [cron, job], joins) == 3
    assert owner_size("indexed-job", pod, [cron], joins) is None
    assert owner_size("airlock", pod, [job], joins) is None
