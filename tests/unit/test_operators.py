"""The operators keep to their folders: each key an operator writes (label, annotation,
taint, ...) is spelled once, in its folder's keys.py, and imported wherever it is read or
made; each convention finds its gangs, in the registry's order, and only on pods with its
label."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import webhook
from tests.builders import PodBuilder, pod
from webhook.conventions.base import Convention
from webhook.keys import GANG_NAME_LABEL, GANG_SIZE_ANNOTATION
from webhook.operators.kubeflow import making as kubeflow
from webhook.operators.kubeflow.keys import PLURALS
from webhook.operators.registry import CONVENTIONS, INTEGRATIONS, membership_of, owner_sized
from webhook.pods import PodView

PACKAGE = Path(webhook.__file__).parent
OPERATORS_DIR = PACKAGE / "operators"
KEYS = sorted(OPERATORS_DIR.glob("*/keys.py"))
# A string that is a whole key: `domain.tld/name` (a prefix such as `domain.tld/` too).
KEY = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.[a-z]{2,}/[-A-Za-z0-9_./]*")


def _literals(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def _keys(path: Path) -> set[str]:
    """The module's key constants: module-level strings shaped like `domain/name`."""
    return {node.value.value for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and KEY.fullmatch(node.value.value)}


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_the_key_finder_sees_the_keys() -> None:
    keys = _keys(OPERATORS_DIR / "jobset" / "keys.py")
    assert {"jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
            "jobset.sigs.k8s.io/job-index"} <= keys
    assert "jobset.x-k8s.io" not in keys  # an API group is no key
    assert KEY.fullmatch("jobset.sigs.k8s.io/")  # nor may a module spell a key's prefix


def test_every_operator_folder_has_its_keys() -> None:
    folders = {p.parent for p in OPERATORS_DIR.glob("*/reading.py")}
    # Airlock's own keys are the webhook's and the controller's too: webhook/keys.py.
    # Autoscalers' pods Airlock does not read; it only marks pods with their keys.
    assert {p.parent for p in KEYS} == (folders - {OPERATORS_DIR / "airlock"}) | {
        OPERATORS_DIR / "karpenter", OPERATORS_DIR / "clusterautoscaler"}
    assert all(_keys(p) for p in KEYS)


@pytest.mark.parametrize("home", KEYS, ids=_name)
def test_an_operators_keys_are_spelled_only_in_its_keys_module(home: Path) -> None:
    keys = _keys(home)
    elsewhere = {
        f"{_name(path)}: {key}"
        for path in PACKAGE.rglob("*.py") if path != home
        for literal in _literals(path) for key in keys if key in literal
    }
    assert not elsewhere


@pytest.mark.parametrize("module", sorted(set(OPERATORS_DIR.rglob("*.py")) - set(KEYS)),
                         ids=_name)
def test_reading_and_making_spell_no_key(module: Path) -> None:
    """Keys are imported from keys.py, never written out nor built from a prefix."""
    assert not {literal for literal in _literals(module) if KEY.fullmatch(literal)}


def _carrying(keys: dict[str, str]) -> PodView:
    """A pod with each key as both a label and an annotation."""
    obj = pod().build()
    obj["metadata"]["labels"] = obj["metadata"]["annotations"] = keys
    return PodView.parse(obj)


@pytest.mark.parametrize("convention", [c for c in CONVENTIONS if c.label],
                         ids=lambda c: c.name)
def test_a_convention_finds_no_gang_without_its_label(convention: Convention) -> None:
    """The registry asks a convention only about pods with its label; this holds only if
    the convention itself finds nothing without it, whatever else the pod carries."""
    keys = {key: "1" for key in {c.label for c in CONVENTIONS if c.label}.union(
        *map(_keys, KEYS))}
    assert convention.detect(_carrying(keys)) is not None
    del keys[convention.label]
    assert convention.detect(_carrying(keys)) is None


# One row per convention (by its gang-source name): a pod it finds, and the gang found
# as (name, size, source); then rows for the table's order.
FOUND: dict[str, tuple[PodBuilder, tuple[str, int | None, str] | None]] = {
    "airlock": (pod().gpus(1).label(GANG_NAME_LABEL, "g1").annotation(GANG_SIZE_ANNOTATION, "8"),
                ("g1", 8, "airlock")),
    "kueue": (pod().gpus(1).label("kueue.x-k8s.io/pod-group-name", "pg")
              .annotation("kueue.x-k8s.io/pod-group-total-count", "4"), ("pg", 4, "kueue")),
    "leaderworkerset": (pod().gpus(1).label("leaderworkerset.sigs.k8s.io/name", "llm")
                        .label("leaderworkerset.sigs.k8s.io/group-index", "2")
                        .annotation("leaderworkerset.sigs.k8s.io/size", "4"),
                        ("llm-2", 4, "leaderworkerset")),
    "jobset": (pod().gpus(1).label("jobset.sigs.k8s.io/jobset-name", "js")
               .label("jobset.sigs.k8s.io/replicatedjob-name", "workers"),
               ("js-workers", None, "jobset")),
    "kubeflow": (pod().gpus(1).label("training.kubeflow.org/job-name", "pt"),
                 ("pt", None, "kubeflow")),
    "podgroup": (pod().gpus(1).label("scheduling.x-k8s.io/pod-group", "pg"),
                 ("pg", None, "podgroup")),
    "indexed-job": (pod().gpus(1).label("batch.kubernetes.io/job-name", "j")
                    .label("batch.kubernetes.io/job-completion-index", "3"),
                    ("j", None, "indexed-job")),
    "kuberay": (pod().gpus(1).label("ray.io/cluster", "rc"), ("rc", None, "kuberay")),
    "scheduling-group": (pod().gpus(1).set("schedulingGroup", {"podGroupName": "pg"}),
                         ("pg", None, "scheduling-group")),
    "a label convention before the spec's": (
        pod().gpus(1).set("schedulingGroup", {"podGroupName": "pg"})
        .label("batch.kubernetes.io/job-name", "j")
        .label("batch.kubernetes.io/job-completion-index", "0"), ("j", None, "indexed-job")),
    "an empty scheduling group is no gang": (pod().gpus(1).set("schedulingGroup", {}), None),
    "a plain job is no gang": (pod().gpus(1).label("batch.kubernetes.io/job-name", "j"), None),
    "the first in table order wins": (
        pod().gpus(1).label(GANG_NAME_LABEL, "mine").annotation(GANG_SIZE_ANNOTATION, "2")
        .label("ray.io/cluster", "rc"), ("mine", 2, "airlock")),
}


def test_every_convention_has_a_row() -> None:
    assert {c.name for c in CONVENTIONS} <= set(FOUND)


@pytest.mark.parametrize("case", FOUND)
def test_each_convention_finds_its_gang(case: str) -> None:
    builder, expected = FOUND[case]
    gang = membership_of(PodView.parse(builder.build()))
    assert (None if gang is None else (gang.name, gang.size, gang.source)) == expected


@pytest.mark.parametrize("source", [c.name for c in CONVENTIONS])
def test_a_gang_whose_pods_state_no_size_has_an_owner_lookup(source: str) -> None:
    """Else the controller could never size it, and the gang would wait for ever."""
    expected = FOUND[source][1]
    assert expected is not None
    assert expected[1] is not None or owner_sized(source) is not None


def test_no_two_operators_expand_one_kind() -> None:
    kinds = [kind for i in INTEGRATIONS for kind in i.expansions]
    assert len(kinds) == len(set(kinds))


def test_the_owner_of_every_kubeflow_kind_explain_makes_is_found() -> None:
    """A pod of each kind explain expands names an owner the convention looks up."""
    assert {kind for _, kind in kubeflow.EXPANSIONS} == set(PLURALS)
