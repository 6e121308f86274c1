"""A gang's life after admission, on the real control plane: a replacement member joins
the gang's own domain, a pod beyond the gang's size stays gated with a reason, and a size
only the owner knows (an indexed Job's parallelism) is looked up live."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from tests.builders import gang_pod, pod
from tests.kube import (
    Controllers,
    Scrapers,
    all_bound,
    create_gang,
    events,
    gated,
    metrics_url,
    nodes_by_name,
    pods_of,
    scrape,
    until,
)
from webhook.sandbox.nodes import CLIQUE_LABEL


async def _domain_of(api: client.ApiClient, ns: str, prefix: str) -> set[str]:
    nodes = await nodes_by_name(api)
    return {nodes[p["spec"]["nodeName"]][CLIQUE_LABEL] for p in await pods_of(api, ns, prefix)}


async def test_a_replacement_joins_its_gang_and_an_extra_stays_gated(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    core = client.CoreV1Api(api)
    controllers.start()
    await create_gang(api, namespace, "job", 2)

    async def bound() -> bool:
        return await all_bound(api, namespace, "job", 2)

    await until(bound)
    (domain,) = await _domain_of(api, namespace, "job")
    # A member dies and its controller makes a new pod under a new name.
    await core.delete_namespaced_pod("job-1", namespace, grace_period_seconds=0)
    await core.create_namespaced_pod(namespace, body=gang_pod("job", 7, 2))

    async def replaced() -> bool:
        pods = await pods_of(api, namespace, "job")
        return {p["metadata"]["name"] for p in pods} == {"job-0", "job-7"} and all(
            p["spec"].get("nodeName") for p in pods)

    await until(replaced)
    assert await _domain_of(api, namespace, "job") == {domain}
    (joined,) = [p for p in await pods_of(api, namespace, "job-7")]
    assert joined["spec"]["nodeSelector"] == {CLIQUE_LABEL: domain}
    # One more is one too many for a gang of 2: it stays gated and is told why.
    await core.create_namespaced_pod(namespace, body=gang_pod("job", 8, 2))

    async def told() -> bool:
        return any(e.startswith("Oversize: the gang of 2 already has 2 members admitted")
                   for e in await events(api, namespace, "job-8"))

    await until(told)
    (extra,) = await pods_of(api, namespace, "job-8")
    assert gated(extra)
    assert not extra["spec"].get("nodeName")


async def test_indexed_job_size_comes_from_the_job(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    # The Job only states the size: suspended, the Job controller makes no pods of its
    # own, and the test makes them one at a time (the conventions read the labels; the
    # pods carry no ownerReference, so the Job controller does not adopt them).
    await client.BatchV1Api(api).create_namespaced_job(namespace, body={
        "metadata": {"name": "train"},
        "spec": {"parallelism": 3, "completions": 3, "completionMode": "Indexed",
                 "suspend": True,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "c", "image": "trainer"}]}}}})
    controllers.start()

    def worker(i: int) -> dict[str, object]:
        obj = (pod(f"train-{i}").gpus(8).label("batch.kubernetes.io/job-name", "train")
               .label("batch.kubernetes.io/job-completion-index", str(i)).build())
        del obj["metadata"]["namespace"]
        return obj

    core = client.CoreV1Api(api)
    for i in range(2):
        await core.create_namespaced_pod(namespace, body=worker(i))

    async def two_of_three() -> bool:
        return any(e.startswith("Waiting: 2/3 pods present")
                   for e in await events(api, namespace, "train"))

    await until(two_of_three)
    assert all(gated(p) for p in await pods_of(api, namespace, "train"))
    await core.create_namespaced_pod(namespace, body=worker(2))

    async def bound() -> bool:
        return await all_bound(api, namespace, "train", 3)

    await until(bound)
    assert len(await _domain_of(api, namespace, "train")) == 1


async def test_metrics_and_health_are_served(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        scrapers: Scrapers) -> None:
    base = metrics_url(controllers.start())
    await create_gang(api, namespace, "metered", 2)

    async def bound() -> bool:
        return await all_bound(api, namespace, "metered", 2)

    await until(bound)
    assert await scrape(f"{base}/healthz") == (200, "ok\n")
    status, text = await scrape(f"{base}/metrics", scrapers.reader)
    assert status == 200
    assert "airlock_gangs_admitted_total 1.0" in text
    assert 'airlock_gang_time_to_admit_seconds_count 1.0' in text
    assert "airlock_fit_duration_seconds_count" in text
    assert "airlock_gangs_waiting" in text


async def test_a_pods_priority_is_fixed_when_it_is_created(api: client.ApiClient,
                                                           namespace: str) -> None:
    """Why the controller orders gangs by the pods' own `spec.priority` and neither
    watches nor may read PriorityClasses: the apiserver copies the class's value onto the
    pod at creation, and lets neither the class's value nor the pod's priority change."""
    scheduling = client.SchedulingV1Api(api)
    core = client.CoreV1Api(api)
    name = f"fixed-{namespace}"
    await scheduling.create_priority_class(body={"metadata": {"name": name}, "value": 7000})
    try:
        with pytest.raises(client.exceptions.ApiException) as revalued:
            await scheduling.patch_priority_class(name, body={"value": 9000})
        assert revalued.value.status == 422
        made = await core.create_namespaced_pod(namespace, body={
            "metadata": {"name": "p"},
            "spec": {"priorityClassName": name,
                     "containers": [{"name": "c", "image": "busybox"}]}})
        assert made.spec.priority == 7000
        with pytest.raises(client.exceptions.ApiException) as moved:
            await core.patch_namespaced_pod("p", namespace, body={"spec": {"priority": 9000}})
        assert moved.value.status == 422
    finally:
        await scheduling.delete_priority_class(name)
