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
import json
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import CLIQUE
from tests.commands import airlock_command
from tests.kube import (
    Controllers,
    Scrapers,
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
from webhook.sandbox.clients import service_account_token
from webhook.sandbox.controlplane import ControlPlane

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,2600")
VIEWER_ROLE = "airlock-dashboard-viewer"


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


async def _status(plane: ControlPlane, policies: Path) -> dict[str, Any]:
    shown = await asyncio.create_subprocess_exec(
        *airlock_command("status", "--kubeconfig", str(plane.admin_kubeconfig),
                         "--policies", str(policies), "-o", "json"),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    assert shown.returncode == 0
    found: dict[str, Any] = json.loads(out)
    return found


def _rows(driver: Any, table: str) -> list[list[str]]:
    from selenium.webdriver.common.by import By
    return [[c.text for c in row.find_elements(By.CSS_SELECTOR, "th, td")]
            for row in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]


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
        WebDriverWait(browser, 20).until(_titled(title))
    assert 'may not get /dashboard' not in browser.page_source

    mine = f"{namespace}/"

    def waiting_on_page() -> list[list[str]]:
        return [r for r in _rows(browser, "waiting") if r[0].startswith(mine)]

    async def agree() -> bool:
        """The page's waiting gangs and queues are those of `airlock status`."""
        shown = await _status(control_plane, session_policies)
        on_page = {(r[0], r[1], r[5]) for r in waiting_on_page()}
        told = {(w["gang"], w["queue"], w["reason"]) for w in shown["waiting"]
                if w["gang"].startswith(mine)}
        queues = {tuple(r[:5]) for r in _rows(browser, "queues")}
        listed = {(q["name"], *(f"{q[k]:g}" for k in ("nominal", "used", "borrowed",
                                                      "weight"))) for q in shown["queues"]}
        return bool(told) and on_page == told and queues == listed

    await until(agree, within=60)
    (waiting,) = waiting_on_page()
    assert waiting[0] == f"{namespace}/wait"

    # The running gang, in its NVLink domain: in the running table and on the map.
    cliques = {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "run")}
    labels = {n.metadata.name: n.metadata.labels
              for n in (await client.CoreV1Api(api).list_node()).items}
    (clique,) = {labels[n][CLIQUE] for n in cliques}
    (running,) = [r for r in _rows(browser, "running") if r[0] == f"{namespace}/run"]
    assert (running[2], running[5]) == ("training", f"nvlink {clique}")
    groups = browser.find_elements(By.CSS_SELECTOR, "#groups section")
    (group,) = [g for g in groups if f"nvlink {clique}:" in
                g.find_element(By.TAG_NAME, "h3").text]
    held = {r[0]: r[3] for r in (
        [c.text for c in row.find_elements(By.CSS_SELECTOR, "th, td")]
        for row in group.find_elements(By.CSS_SELECTOR, "tbody tr"))}
    assert {held[n] for n in cliques} == {f"{namespace}/run (training): 8 GPUs"}
    cells = group.find_elements(By.CSS_SELECTOR, "span.gpu.training")
    assert len(cells) >= 32
    assert cells[0].get_attribute("title").endswith(f"{namespace}/run, training")

    # The whole page, no more: the window as tall as what it shows.
    bottom = browser.execute_script(
        "return document.querySelector('main').getBoundingClientRect().bottom")
    browser.set_window_size(1400, 1400)
    inner = browser.execute_script("return window.innerHeight")
    browser.set_window_size(1400, 1400 - int(inner) + int(bottom) + 24)
    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    _keep(shot)
