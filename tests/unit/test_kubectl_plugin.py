"""`kubectl airlock`'s pure parts: its flags (kubectl's, before or after the subcommand),
what `why` is asked about and which pods belong to it, what it says of them, the queues
table, and the one line an error becomes."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any, get_args

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import POLICY_DEFAULT, member, pod, raw_member, shipped_policy
from tests.paths import ROOT
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.reasons import WAIT_REASONS
from webhook.controller.core.reporting import LineReason
from webhook.keys import IGNORE_NAMESPACE_LABEL
from webhook.operators.jobset.keys import JOBSET_LABEL, REPLICATED_JOB_LABEL
from webhook.plugin.asking import facts
from webhook.plugin.commands import build_parser
from webhook.plugin.reaching import Failure, Target, failure, load, target, written
from webhook.plugin.references import BadReference, Reference, belongs, parse_reference
from webhook.plugin.tables import queue_rows, queues_text
from webhook.plugin.telling import MEANINGS, TO_START, PodFacts, judge
from webhook.pods import PodView

# --- flags ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["-n", "ml", "--context", "prod", "why", "train-0"],
    ["why", "train-0", "-n", "ml", "--context", "prod"],
    ["--context", "prod", "why", "--namespace", "ml", "train-0"],
])
def test_kubectls_flags_go_before_or_after_the_subcommand(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.command, args.target, args.namespace, args.context) == (
        "why", "train-0", "ml", "prod")
    assert args.request_timeout == 60.0
    assert args.output == "text"


def test_explain_takes_files_as_kubectl_does() -> None:
    args = build_parser().parse_args(["explain", "-f", "a.yaml", "--filename", "b.yaml",
                                      "-o", "json", "--policies", "p"])
    assert args.file == [Path("a.yaml"), Path("b.yaml")]
    assert (args.output, args.policies) == ("json", Path("p"))


def test_a_subcommand_is_required() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([])


# --- what `why` is asked about ----------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("train-0", Reference("", "Pod", "train-0")),
    ("po/train-0", Reference("", "Pod", "train-0")),
    ("deploy/web", Reference("apps", "Deployment", "web")),
    ("Deployments/web", Reference("apps", "Deployment", "web")),
    ("pytorchjob/bert", Reference("kubeflow.org", "PyTorchJob", "bert")),
    ("pytorchjobs.kubeflow.org/bert", Reference("kubeflow.org", "PyTorchJob", "bert")),
    ("jobset/big", Reference("jobset.x-k8s.io", "JobSet", "big")),
    ("raycluster/ray", Reference("ray.io", "RayCluster", "ray")),
    ("lws/serve", Reference("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "serve")),
])
def test_references_name_kinds_as_kubectl_does(text: str, expected: Reference) -> None:
    assert parse_reference(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("service/web", "'service' is not a kind kubectl airlock knows; it knows CronJob"),
    ("deploy/", "expected POD or KIND/NAME"),
    ("a/b/c", "expected POD or KIND/NAME"),
])
def test_a_bad_reference_says_what_is_known(text: str, says: str) -> None:
    with pytest.raises(BadReference, match=says.replace("(", r"\(")):
        parse_reference(text)


def _view(raw: dict[str, Any]) -> PodView:
    return PodView.parse(raw)


RS = ("apps/v1", "ReplicaSet", "web-5d8f")
JOB = ("batch/v1", "Job", "big-workers-0")


def test_a_deployments_pods_are_found_through_its_replicaset() -> None:
    member = _view(pod("web-5d8f-x").gpus(1).owner("ReplicaSet", "web-5d8f", "apps/v1").build())
    owners = {RS: ({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},)}
    assert belongs(member, Reference("apps", "Deployment", "web"), owners)
    assert belongs(member, Reference("apps", "ReplicaSet", "web-5d8f"), owners)
    assert not belongs(member, Reference("apps", "Deployment", "other"), owners)
    # An owner that could not be read ends the walk.
    assert not belongs(member, Reference("apps", "Deployment", "web"), {})


def test_a_jobsets_pods_are_found_by_its_conventions_label_without_reading_owners() -> None:
    member = _view(pod("big-workers-0-0").gpus(8).label(JOBSET_LABEL, "big")
                   .label(REPLICATED_JOB_LABEL, "workers")
                   .owner("Job", "big-workers-0").build())
    assert belongs(member, Reference("jobset.x-k8s.io", "JobSet", "big"), {})
    assert not belongs(member, Reference("jobset.x-k8s.io", "JobSet", "small"), {})
    # And up its Job, when the owners are read.
    assert belongs(member, Reference("batch", "Job", "big-workers-0"), {})


def test_owners_that_loop_end_the_walk() -> None:
    member = _view(pod("a").owner("ReplicaSet", "web-5d8f", "apps/v1").build())
    owners = {RS: ({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f"},)}
    assert not belongs(member, Reference("apps", "Deployment", "web"), owners)


# --- what `why` says ----------------------------------------------------------------------

def test_every_reason_status_gives_has_a_meaning_and_a_way_to_start() -> None:
    # LineReason: the wait reasons, or the two a gang about to go is listed with.
    _, going = get_args(LineReason)
    reasons = {*WAIT_REASONS, *get_args(going)}
    assert set(TO_START) == set(MEANINGS) == reasons


def _wait(gang: str, reason: str, queue: str = "team-a") -> dict[str, Any]:
    return {"gang": gang, "queue": queue, "priority": 100, "pods": 4, "gpus": 32.0,
            "reason": reason, "why": f"Waiting: {reason.lower()}"}


STATUS: dict[str, Any] = {
    "queues": [{"name": "team-a", "nominal": 32, "used": 40, "borrowed": 8, "weight": 1,
                "share": None}],
    "waiting": [_wait("ml/first", "Admissible"), _wait("ml/head", "NoDomainFits"),
                _wait("ml/behind", "BehindHead"), _wait("ml/greedy", "OverQuota"),
                _wait("other/elsewhere", "NoRoom", queue="team-b")],
    "models": [], "modelsWithoutNodes": [],
}


def _facts(name: str, unit: str | None, governed: bool = True,
           why: str = "policy rule training") -> PodFacts:
    return PodFacts(name, governed, why, unit, "gated")


def test_a_waiting_gang_is_shown_with_its_reason_blockers_and_way_to_start() -> None:
    verdict = judge("pod ml/head-0", [_facts("head-0", "ml/head")], STATUS)
    assert verdict.text() == (
        "pod ml/head-0\n"
        "Gang:     ml/head (4 pods, 32 GPUs, priority 100)\n"
        "Queue:    team-a\n"
        f"Reason:   NoDomainFits: {MEANINGS['NoDomainFits']}\n"
        "Message:  Waiting: nodomainfits\n"
        "Blockers: ml/first (Admissible) goes first\n"
        f"To start: {TO_START['NoDomainFits']}\n")


@pytest.mark.parametrize(("gang", "blockers"), [
    ("ml/behind", ["ml/first, the head of queue team-a (Admissible)"]),
    ("ml/greedy", ["queue team-a uses 40 GPUs: nominal 32, 8 borrowed"]),
    # Only what is about to start ahead of it takes the room first.
    ("other/elsewhere", ["ml/first (Admissible) goes first"]),
])
def test_blockers_are_read_off_the_report(gang: str, blockers: list[str]) -> None:
    (shown,) = judge("x", [_facts("p", gang)], STATUS).as_json()["gangs"]
    assert shown["blockers"] == blockers


def test_the_json_carries_the_status_entry_whole() -> None:
    # A key the report's entries gain (a predicted start) reaches `why -o json` as it is.
    status = {**STATUS, "waiting": [{**_wait("ml/head", "NoRoom"),
                                     "predictedStart": "2026-11-29T06:00:00Z"}]}
    (shown,) = judge("x", [_facts("p", "ml/head")], status).as_json()["gangs"]
    assert shown["waiting"]["predictedStart"] == "2026-11-29T06:00:00Z"
    assert shown["toStart"] == TO_START["NoRoom"]


@pytest.mark.parametrize(("keys", "said"), [
    ({"predictedStart": "2026-11-29T06:00:00Z", "predictionBlocker": None},
     "Starts:   2026-11-29T06:00:00Z"),
    ({"predictedStart": None, "predictionBlocker": "ml/wall"},
     "Starts:   unknown (ml/wall runs with no known end)"),
    ({"predictedStart": None, "predictionBlocker": None}, "Starts:   unknown"),
])
def test_the_text_says_the_predicted_start(keys: dict[str, str | None], said: str) -> None:
    status = {**STATUS, "waiting": [{**_wait("ml/head", "NoRoom"), **keys}]}
    assert said in judge("x", [_facts("p", "ml/head")], status).text()


def test_pods_not_governed_say_why() -> None:
    excluded = _facts("tool", None, governed=False, why="namespace kube-system is excluded")
    verdict = judge("pod kube-system/tool", [excluded], STATUS)
    assert not verdict.governed
    assert verdict.text() == ("pod kube-system/tool: not governed by Airlock: namespace "
                              "kube-system is excluded\n")
    mixed = judge("deployment ml/web", [
        _facts("web-a", None, False, "requests no accelerator and has no explicit class"),
        _facts("web-b", None, False, "scheduled by my-scheduler, not a scheduler Airlock "
                                     "handles")], STATUS)
    assert mixed.text().splitlines() == [
        "deployment ml/web: not governed by Airlock",
        "  pod web-a: requests no accelerator and has no explicit class",
        "  pod web-b: scheduled by my-scheduler, not a scheduler Airlock handles"]


def test_a_governed_pod_not_waiting_says_its_state() -> None:
    running = PodFacts("solo", True, "policy rule inference", None, "bound to node n1 (Running)")
    verdict = judge("pod ml/solo", [running], STATUS)
    assert verdict.text() == ("pod ml/solo\nGang:  pod solo\nPods:  1\n"
                              "State: bound to node n1 (Running)\n")


def test_a_gang_the_dry_run_does_not_list_tells_the_controllers_last_event() -> None:
    gated = "gated; the controller's dry run names no wait for it"
    pods = [PodFacts(f"job-{i}", True, "policy rule training", "ml/job", gated,
                     "NeverFits: Waiting: 9/9 pods present" if i else None) for i in range(2)]
    assert judge("job ml/job", pods, STATUS).text().splitlines() == [
        "job ml/job", "Gang:       ml/job", "Pods:       2", f"State:      {gated}",
        "Last event: NeverFits: Waiting: 9/9 pods present"]


@pytest.mark.parametrize(("raw", "labels", "expected"), [
    (raw_member("train", 0, size=4), {}, PodFacts(
        "train-0", True, "", "ml/train",
        "gated; the controller's dry run names no wait for it")),
    (pod("tool", "kube-system").gpus(1).build(), {}, PodFacts(
        "tool", False, "namespace kube-system is excluded", None,
        "not gated: kube-scheduler places it (see its events)")),
    (pod("tool", "ml").gpus(1).build(), {IGNORE_NAMESPACE_LABEL: "true"}, PodFacts(
        "tool", False, f"namespace ml is labelled {IGNORE_NAMESPACE_LABEL}=true", None,
        "not gated: kube-scheduler places it (see its events)")),
    (pod("notebook").build() | {"status": {"phase": "Succeeded"}}, {}, PodFacts(
        "notebook", False, "requests no accelerator and has no explicit class", None,
        "finished (Succeeded)")),
    (pod("held").gpus(1).gate("kueue.x-k8s.io/admission").build(), {}, PodFacts(
        "held", True, "", None,
        "held by the scheduling gate kueue.x-k8s.io/admission: that system starts it, "
        "not Airlock")),
])
def test_a_pods_facts_are_the_webhooks_classification_and_the_controllers_unit(
        raw: dict[str, Any], labels: dict[str, str], expected: PodFacts) -> None:
    cluster = Tracked.of([], [member("train", 0, size=4)], POLICY_DEFAULT)
    found = facts(raw, raw["metadata"]["namespace"], shipped_policy(), labels, cluster)
    # A governed pod's reason is whichever rule the shipped policy names: not compared.
    assert (found if expected.why else dataclasses.replace(found, why="")) == expected


# --- queues -------------------------------------------------------------------------------

def test_queues_show_limits_and_what_waits() -> None:
    rows = queue_rows(STATUS, {"team-a": 16.0})
    assert (rows[0].borrowingLimit, rows[0].waitingGangs, rows[0].waitingGpus) == (16.0, 4, 128.0)
    assert queues_text(rows, STATUS).splitlines() == [
        "QUEUE            NOMINAL  USED  BORROWED  LIMIT  WEIGHT  WAITING",
        "team-a                32    40         8     16       1  4 (128 GPUs)"]
    unlimited = queue_rows(STATUS, {})
    assert queues_text(unlimited, STATUS).splitlines()[1].split()[4] == "-"


def test_queues_show_each_gpu_model_policy_names() -> None:
    status = {**STATUS, "models": [{"queue": "team-a", "model": "h100", "nominal": 32,
                                    "used": 40, "borrowed": 8}],
              "modelsWithoutNodes": ["b200"]}
    assert queues_text(queue_rows(status, {}), status).splitlines()[2:] == [
        "", "QUEUE            MODEL     NOMINAL  USED  BORROWED",
        "team-a           h100           32    40         8",
        "GPU model b200: no node has its labels"]


# --- errors, in one line ----------------------------------------------------------------

def _target() -> Target:
    configuration = client.Configuration()
    configuration.host = "https://gpu.example:6443"
    return Target(configuration, "ml")


def _api_error(status: int, message: str) -> ApiException:
    e = ApiException(status=status, reason="Forbidden")
    e.body = f'{{"kind": "Status", "message": "{message}"}}'.encode()
    return e


@pytest.mark.parametrize(("error", "line"), [
    (_api_error(403, 'pods is forbidden: User \\"bob\\" cannot list resource \\"pods\\"'),
     'forbidden: pods is forbidden: User "bob" cannot list resource "pods" (kubectl airlock '
     "reads with your own credentials; docs/kubectl-plugin.md lists what it needs)"),
    (_api_error(401, "Unauthorized"),
     "unauthorized: the apiserver at https://gpu.example:6443 refused the kubeconfig's "
     "credentials"),
    (aiohttp.ClientConnectionError("Connection refused"),
     "cannot reach the apiserver at https://gpu.example:6443: Connection refused"),
    (TimeoutError(), "the apiserver at https://gpu.example:6443 did not answer in time "
                     "(--request-timeout)"),
])
def test_errors_become_one_line(error: BaseException, line: str) -> None:
    assert str(failure(error, _target())) == line


async def test_the_kubeconfig_and_its_contexts_namespace_are_kubectls(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://gpu.example:6443"}}]
users: [{name: u, user: {token: abc}}]
contexts:
  - {name: dev, context: {cluster: c, user: u, namespace: ml}}
  - {name: prod, context: {cluster: c, user: u}}
current-context: dev
""")
    assert (await target(config, None, None)).namespace == "ml"
    assert (await target(config, "prod", None)).namespace == "default"
    assert (await target(config, None, "team-b")).namespace == "team-b"
    with pytest.raises(Failure, match="no usable kubeconfig"):
        await target(config, "staging", None)
    with pytest.raises(Failure, match=r"no kubeconfig: .*nowhere does not exist"):
        await target(tmp_path / "nowhere", None, None)


def test_a_bad_cluster_policy_names_the_configmap() -> None:
    files = {"00-scope.yaml": "apiVersion: gpu-airlock.io/v1alpha1\nkind: AirlockPolicy\n"
                              "metadata: {name: x}\nspec: {nonsense: 1}\n"}
    with written(files) as directory, pytest.raises(Failure) as raised:
        load(directory, "ConfigMap airlock-system/airlock-policies")
    assert str(raised.value).startswith(
        "the policy in ConfigMap airlock-system/airlock-policies is not valid: "
        "ConfigMap airlock-system/airlock-policies: 00-scope.yaml")


# --- installation ---------------------------------------------------------------------------

def test_the_package_installs_the_plugin_and_the_krew_manifest_names_its_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["kubectl-airlock"] == "webhook.plugin.commands:main"
    manifest = yaml.safe_load((ROOT / "deploy" / "krew" / "airlock.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert (manifest["kind"], manifest["metadata"]["name"]) == ("Plugin", "airlock")
    version = f"v{project['version']}"
    assert manifest["spec"]["version"] == version
    for platform in manifest["spec"]["platforms"]:
        assert f"/{version}/kubectl-airlock_{version}_" in platform["uri"]
        assert platform["bin"] == "kubectl-airlock"
        assert re.fullmatch("[0-9a-f]{64}", platform["sha256"])
