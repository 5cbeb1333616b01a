"""The dashboard at /: headless Chromium asks the demo a question through the page and reads what
it renders; /api/map over HTTP, bounded and scoped to the caller's tenant."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from .conftest import Api

QUESTION = "INC-2025-014 was triggered by an expired certificate on some system. Which team runs that system?"
# Off the corpus, and with markup that would load an image (and fail to) if the page parsed it.
ROTATION = "How often must the Token Service rotate its token signing keys?"
UNANSWERABLE = 'What is the airspeed of an unladen swallow <img id="injected" src="/nowhere.png">?'

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("the dashboard test needs Debian's chromium and chromium-driver (apt-get install them)")

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _ask(driver: WebDriver, api: Api, question: str, key: str = "demo", min_support: str = "") -> str:
    """Ask through the page; the page's state once the answer (or an error) is shown."""
    driver.get_log("browser")  # each question starts with an empty console log
    driver.get(api.base + "/")
    for field, text in (("api-key", api.keys[key]), ("question", question), ("min-support", min_support)):
        element = driver.find_element(By.ID, field)
        element.clear()
        element.send_keys(text)
    driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, 90).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
                                    in ("done", "error"))
    return str(driver.find_element(By.TAG_NAME, "body").get_attribute("data-state"))


def _errors(driver: WebDriver) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _screenshot(driver: WebDriver, tmp_path: Path, name: str) -> None:
    """The whole page as a PNG, in the test's directory and in TORTUS_SCREENSHOT_DIR when set."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 100, 12_000))
    targets = [tmp_path]
    if os.environ.get("TORTUS_SCREENSHOT_DIR"):
        targets.append(Path(os.environ["TORTUS_SCREENSHOT_DIR"]))
    for target in targets:
        target.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(target / name))
    driver.set_window_size(1400, 1000)


def test_dashboard_shows_the_path_map_pruned_candidates_and_marked_evidence(
    browser: WebDriver, api: Api, tmp_path: Path,
) -> None:
    with api.client() as http:
        expected = http.post("/api/query", json={"question": QUESTION, "explain": True}).json()
    assert _ask(browser, api, QUESTION) == "done", browser.find_element(By.ID, "status").text
    _screenshot(browser, tmp_path, "dashboard.png")

    edge_types = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#hops tbody td.edge-type")]
    assert edge_types == [hop["edge_type"] for hop in expected["path"]]
    assert "search" in edge_types and set(edge_types) - {"search"}, "seeds and walked hops both shown"

    traces = browser.execute_script(
        "const map = document.getElementById('torus-map');"
        "return map.querySelector('.main-svg') ? map.data.map(t => [t.name, t.x.length]) : []")
    drawn = dict(traces)
    assert drawn.get("seeds", 0) > 0 and drawn.get("path", 0) > 0, traces
    legend = browser.find_element(By.ID, "torus-map").find_elements(By.CSS_SELECTOR, ".legendtext")
    assert {"seeds", "path"} <= {item.text for item in legend}

    pruned = browser.find_elements(By.CSS_SELECTOR, "#pruned tbody tr")
    assert len(pruned) == len(expected["diagnostics"]["pruned"]) > 0
    # The table scrolls: rows out of its view have no visible text, but their content is there.
    assert all(row.find_element(By.CSS_SELECTOR, "td.reason").get_attribute("textContent") for row in pruned)

    marks = [mark.text for mark in browser.find_elements(By.CSS_SELECTOR, "#evidence mark")]
    claims = [claim["text"] for claim in expected["claims"]]
    assert marks and all(any(mark in claim for claim in claims) for mark in marks), (marks, claims)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#budget [role=meter]")) == len(expected["budget"])
    assert _errors(browser) == []


def test_dashboard_withholds_honestly_and_shows_api_text_as_text(browser: WebDriver, api: Api, tmp_path: Path) -> None:
    assert _ask(browser, api, UNANSWERABLE) == "done", browser.find_element(By.ID, "status").text
    _screenshot(browser, tmp_path, "dashboard-withheld.png")
    answer = browser.find_element(By.ID, "answer").text
    assert "Not enough evidence" in answer and "Refusal:" in answer
    assert browser.find_elements(By.ID, "injected") == []
    assert 'id="injected"' in browser.find_element(By.ID, "question-echo").text
    assert _errors(browser) == []


def test_dashboard_asks_with_the_support_an_answer_needs(browser: WebDriver, api: Api) -> None:
    with api.client() as http:
        strict = http.post("/api/query", json={"question": ROTATION, "min_support": 1}).json()
    assert strict["withheld"]
    assert _ask(browser, api, ROTATION, min_support="1") == "done", browser.find_element(By.ID, "status").text
    assert "Not enough evidence" in browser.find_element(By.ID, "answer").text
    assert _ask(browser, api, ROTATION) == "done"
    assert "Not enough evidence" not in browser.find_element(By.ID, "answer").text
    assert _errors(browser) == []


def test_dashboard_reports_an_unknown_key(browser: WebDriver, api: Api) -> None:
    assert _ask(browser, api, QUESTION, key="revoked") == "error"
    assert "401" in browser.find_element(By.ID, "status").text
    assert any("401" in entry["message"] for entry in _errors(browser)), "the console check sees failed requests"
    assert browser.find_element(By.ID, "result").get_attribute("hidden") is not None


def test_dashboard_assets_are_served_by_the_app(api: Api) -> None:
    with api.client(None) as http:
        page = http.get("/")
        plotly = http.get("/static/plotly.min.js")
        assert http.get("/static/dashboard.js").status_code == 200
        assert http.get("/static/../dashboard.py").status_code == 404
        assert http.get("/static/index.html").status_code == 404
    assert page.status_code == 200 and "tortus-pg key create default --scope query" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert plotly.status_code == 200 and plotly.headers["content-type"].startswith("text/javascript")


def _answer_nodes(api: Api) -> list[int]:
    with api.client() as http:
        answer = http.post("/api/query", json={"question": QUESTION}).json()
    return sorted({e["node_id"] for e in answer["evidence"]} | {s["node_id"] for s in answer["diagnostics"]["seeds"]})


def test_map_places_the_asked_nodes_and_their_neighbours(api: Api) -> None:
    ids = _answer_nodes(api)
    with api.client("reader") as http:
        response = http.post("/api/map", json={"node_ids": ids})
    assert response.status_code == 200, response.text
    nodes = response.json()["nodes"]
    assert sorted(n["node_id"] for n in nodes if not n["neighbour"]) == ids
    assert any(n["neighbour"] for n in nodes)
    assert all(0 <= n["theta"] < 2 * math.pi and 0 <= n["phi"] < 2 * math.pi for n in nodes if n["theta"] is not None)


def test_map_is_bounded_and_strict(api: Api) -> None:
    with api.client() as http:
        too_many = http.post("/api/map", json={"node_ids": list(range(1, 302))})
        extra = http.post("/api/map", json={"node_ids": [1], "depth": 3})
        empty = http.post("/api/map", json={"node_ids": []})
        huge = http.post("/api/map", json={"node_ids": [2**63]})
    assert too_many.status_code == extra.status_code == empty.status_code == huge.status_code == 422
    assert too_many.json()["error"]["code"] == "invalid_request"


def test_map_shows_another_tenant_nothing(api: Api) -> None:
    ids = _answer_nodes(api)
    with api.client("other") as http:
        response = http.post("/api/map", json={"node_ids": ids})
    assert response.status_code == 200 and response.json() == {"nodes": []}
    with api.client(None) as http:
        assert http.post("/api/map", json={"node_ids": ids}).status_code == 401
