"""The controller's dashboard in a real browser: Debian's chromium, headless, driven by
Selenium through /usr/bin/chromedriver, against a controller run as the other e2e tests
run it (its own ServiceAccount, so the page is behind TokenReview and
SubjectAccessReview) on the shared control plane, with a gang running and one waiting.

The page and its JSON answer 403 without a token and to a user without `get` on
/dashboard, and the page says so; with a token bound to airlock-dashboard-viewer the
page shows the queues, waiting gangs and reasons `airlock status -o json` shows, and the
running gang in its NVLink domain on the cluster map. The screenshot is kept: under the
test's tmp dir (the path is printed) and, under CI or with AIRLOCK_ARTIFACTS set, in
that directory (default `artifacts/` at the checkout's root under CI)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from tests.builders import CLIQUE, NOW, blocks, gang, running, shipped_policy, tracked, unit
from tests.kube import (
    Controllers,
    Scrapers,
    airlock_status,
    all_bound,
    create_gang,
    metrics_url,
    pods_of,
    prerequisite_missing,
    scrape,
    until,
    url_reader,
)
from tests.paths import ROOT
from webhook.controller.core.configuring import quotas_of
from webhook.controller.core.health import Health
from webhook.controller.core.mapping import cluster_map
from webhook.controller.core.reporting import report
from webhook.controller.shells.serving import app
from webhook.sandbox.clients import service_account_token
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.launching import free_port

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,2600")
VIEWER_ROLE = "airlock-dashboard-viewer"
# A waiting gang's keys in `airlock status -o json`, and the page's columns for them
# (predictions only once the controller makes them).
WAITING = (("gang", "Gang"), ("queue", "Queue"), ("reason", "Reason"),
           ("predictedStart", "Predicted start"), ("predictionBlocker", "Blocker"))


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Headless chromium with a fresh profile; it accepts the controller's certificate,
    which the controller made at start and nobody can verify."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        prerequisite_missing(f"the dashboard's browser test needs {', '.join(missing)} "
                             f"(apt-get install chromium chromium-driver; scripts/test.sh "
                             f"does)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        prerequisite_missing("selenium is not installed (pip install -e '.[dev]')")
    # Selenium must use the driver and browser given, never fetch its own.
    monkeypatch.setenv("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    options.accept_insecure_certs = True
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


# The page redraws every few seconds: what a test reads of it is read in one script, which
# no redraw can come in the middle of.
CELLS = "[...r.querySelectorAll('th, td')].map(c => c.innerText.trim())"
ROWS = f"""return [...document.querySelectorAll(arguments[0])].map(r => {CELLS})"""
GROUPS = f"""return [...document.querySelectorAll('#groups section')].map(g => ({{
  title: g.querySelector('h3').innerText,
  rows: [...g.querySelectorAll('tbody tr')].map(r => {CELLS}),
  training: [...g.querySelectorAll('span.gpu.training')].map(c => c.title)}}))"""


def _rows(driver: Any, table: str, rows: str = "tbody tr") -> list[list[str]]:
    found: list[list[str]] = driver.execute_script(ROWS, f"#{table} {rows}")
    return found


def _titled(title: str) -> Any:
    def check(driver: Any) -> bool:
        return bool(driver.title == title)
    return check


def _keep(shot: Path) -> None:
    """The screenshot, kept where CI collects artifacts."""
    print(f"dashboard screenshot: {shot}")
    where = os.environ.get("AIRLOCK_ARTIFACTS") or \
        (str(ROOT / "artifacts") if os.environ.get("CI") == "true" else None)
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        print(f"dashboard screenshot kept: {shutil.copy(shot, Path(where) / shot.name)}")


@pytest.fixture
async def viewer(api: client.ApiClient, namespace: str) -> AsyncIterator[str]:
    """A token of a ServiceAccount bound to airlock-dashboard-viewer."""
    await client.CoreV1Api(api).create_namespaced_service_account(
        namespace, body={"metadata": {"name": "viewer"}})
    async with url_reader(api, namespace, "viewer", VIEWER_ROLE, "/dashboard"):
        yield await service_account_token(api, namespace, "viewer")


async def test_the_dashboard_shows_what_status_shows(
        api: client.ApiClient, namespace: str, controllers: Controllers, scrapers: Scrapers,
        viewer: str, control_plane: ControlPlane, session_policies: Path, browser: Any,
        tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = metrics_url(controllers.start())
    # A training gang fills one NVLink domain, a scavenger pod sits in the other: the
    # next training gang of a whole domain waits, first in its queue.
    await create_gang(api, namespace, "run", 4, cls="training")
    await until(lambda: all_bound(api, namespace, "run", 4), within=60)
    await create_gang(api, namespace, "filler", 1, cls="scavenger")
    await until(lambda: all_bound(api, namespace, "filler", 1), within=60)
    await create_gang(api, namespace, "wait", 4, cls="training")
    page, state = f"{base}/dashboard", f"{base}/dashboard/state"

    # Without a token, or with one whose user may not get /dashboard: 403, no data.
    for token in (None, "not-a-token", scrapers.stranger, scrapers.reader):
        for url in (page, state):
            status, text = await scrape(url, token)
            assert status == 403, (url, token, text)
            assert f"{namespace}/run" not in text
    assert "/dashboard needs a bearer token" in (await scrape(state))[1]
    assert (await scrape(state, viewer))[0] == 200

    browser.get(page)
    assert browser.title == "Airlock: 403 Forbidden"
    assert "/dashboard needs a bearer token" in browser.find_element(By.ID, "reason").text
    # The page's form keeps the token in a cookie; a stranger's is refused all the same.
    for token, title in ((scrapers.stranger, "Airlock: 403 Forbidden"), (viewer, "Airlock")):
        browser.find_element(By.ID, "token").send_keys(token)
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        WebDriverWait(browser, 60).until(_titled(title))
    assert 'may not get /dashboard' not in browser.page_source

    mine = f"{namespace}/"

    def waiting_on_page() -> list[dict[str, str]]:
        (heads,) = _rows(browser, "waiting", "thead tr")
        return [dict(zip(heads, r, strict=True)) for r in _rows(browser, "waiting")
                if r[0].startswith(mine)]

    # What each said last: (waiting gangs, queues).
    seen: dict[str, tuple[set[tuple[str, ...]], set[tuple[str, ...]]]] = {}

    async def agree() -> bool:
        """The page's waiting gangs (their reasons, and predictions when the controller
        makes them) and queues are those of `airlock status`."""
        shown = await airlock_status(control_plane.admin_kubeconfig, session_policies)
        told = [w for w in shown["waiting"] if w["gang"].startswith(mine)]
        columns = [(key, head) for key, head in WAITING if any(key in w for w in told)]
        seen["page"] = ({tuple(r.get(head, "") for _, head in columns)
                         for r in waiting_on_page()},
                        {tuple(r[:5]) for r in _rows(browser, "queues")})
        seen["status"] = ({tuple("unknown" if w.get(key) is None else str(w[key])
                                 for key, _ in columns) for w in told},
                          {(q["name"], *(f"{q[k]:g}" for k in ("nominal", "used", "borrowed",
                                                               "weight")))
                           for q in shown["queues"]})
        return bool(told) and seen["page"] == seen["status"]

    try:
        await until(agree, within=90)
    except AssertionError:
        raise AssertionError(f"the page and `airlock status` disagree: {seen}") from None
    (waiting,) = waiting_on_page()
    assert waiting["Gang"] == f"{namespace}/wait"

    # The running gang, in its NVLink domain: in the running table and on the map.
    cliques = {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "run")}
    labels = {n.metadata.name: n.metadata.labels
              for n in (await client.CoreV1Api(api).list_node()).items}
    (clique,) = {labels[n][CLIQUE] for n in cliques}
    (running,) = [r for r in _rows(browser, "running") if r[0] == f"{namespace}/run"]
    assert (running[2], running[5]) == ("training", f"nvlink {clique}")
    (group,) = [g for g in browser.execute_script(GROUPS)
                if f"nvlink {clique}:" in g["title"]]
    held = {r[0]: r[3] for r in group["rows"]}
    assert {held[n] for n in cliques} == {f"{namespace}/run (training): 8 GPUs"}
    assert len(group["training"]) >= 32
    assert group["training"][0].endswith(f"{namespace}/run, training")

    # The whole page, no more: the window as tall as what it shows.
    bottom = browser.execute_script(
        "return document.querySelector('main').getBoundingClientRect().bottom")
    browser.set_window_size(1400, 1400)
    inner = browser.execute_script("return window.innerHeight")
    browser.set_window_size(1400, 1400 - int(inner) + int(bottom) + 24)
    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    _keep(shot)


def _predicted_state() -> dict[str, Any]:
    """A state as the controller computes it (a gang running, two waiting), its waiting
    gangs carrying the predictions the controller may report: one known, one not."""
    nodes = blocks(1, domains=2, nodes=2)
    pods = [*running("train", ["b0d0-n0", "b0d0-n1"]), *gang("big", 3), *gang("next", 2)]
    policy = shipped_policy()
    cluster = tracked(nodes, pods)
    found = report(policy, cluster, (), NOW, {}).as_json()
    first, second = found["waiting"][:2]
    first |= {"predictedStart": "2030-01-01T00:00:00Z", "predictionBlocker": "ml/train"}
    second |= {"predictedStart": None, "predictionBlocker": None}
    drawn = cluster_map(cluster, policy.topology_levels, (unit("big"), "b0d1"),
                        quotas_of(policy, cluster.accelerators).queue_of)
    return {"at": "2030-01-01T00:00:00Z", **found, "clusterMap": drawn.as_json()}


async def test_the_page_shows_predictions_when_the_controller_reports_them(
        browser: Any) -> None:
    """No cluster: the controller's port as `serving.app` makes it, with no reviewer
    (`--metrics-auth none`) and a state made by the same builders. The waiting table
    grows its prediction columns ("unknown" for a null), and the page is keyboard
    navigable: the skip link first, then to the map."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    state = _predicted_state()
    runner = web.AppRunner(app(CollectorRegistry(), Health(), None, (lambda: lambda: state, None)))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        await asyncio.to_thread(browser.get, f"http://127.0.0.1:{port}/dashboard")
        await asyncio.to_thread(WebDriverWait(browser, 20).until, lambda d: len(
            d.find_elements(By.CSS_SELECTOR, "#waiting tbody tr th")) >= 2)
        (heads,) = _rows(browser, "waiting", "thead tr")
        assert heads == ["Gang", "Queue", "Priority", "Pods", "GPUs", "Reason",
                         "Predicted start", "Blocker", "Why"]
        rows = _rows(browser, "waiting")
        assert [(r[0], r[6], r[7]) for r in rows[:2]] == [
            (state["waiting"][0]["gang"], "2030-01-01T00:00:00Z", "ml/train"),
            (state["waiting"][1]["gang"], "unknown", "unknown")]
        kept = [r[0] for r in _rows(browser, "groups", "tr.reserved")]
        assert kept == ["b0d1-n0 kept", "b0d1-n1 kept"]
        # The keyboard: the skip link comes first and takes focus to the map.
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.TAB)
        focused = browser.switch_to.active_element
        assert focused.text == "Skip to the cluster map"
        focused.send_keys(Keys.ENTER)
        assert browser.switch_to.active_element.get_attribute("id") == "map"
    finally:
        await runner.cleanup()
