"""The HTML report of the smoke run, opened in a real headless browser (Chromium from Debian's
packages, driven by Selenium): `benchlib html-report` writes one self-contained file whose
LIGHTYEAR category shows a table's numbers (equal to the rendered LaTeX table) and the figure.

Needs chromium and chromium-driver (apt; .ci/run installs them) and selenium (the dev extra)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, benchlib_exe, tool_env

pytestmark = [pytest.mark.workflow, pytest.mark.slow]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ROW = re.compile(r"^(\w+)((?: & [0-9.]+ \$\\pm\$ [0-9.]+)+) \\\\$")


def table_rows(tex: str) -> dict[str, list[str]]:
    """Method -> its cells ('30.4 ± 5.4') of a rendered robustness table."""
    rows = {}
    for line in tex.splitlines():
        match = ROW.match(line.strip())
        if match:
            cells = match.group(2).split(" & ")[1:]
            rows[match.group(1)] = [c.replace("$\\pm$", "±") for c in cells]
    return rows


@pytest.fixture(scope="module")
def report(smoke_run) -> Path:
    out = smoke_run / "report.html"
    command = [benchlib_exe(), "html-report", "--config", str(REPO / "config" / "smoke.yaml")]
    command += ["-d", str(smoke_run), "--out", str(out), "--snakefile", str(REPO / "Snakefile")]
    result = subprocess.run(command, env=tool_env(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    assert not missing, f"{missing} not found: apt-get install -y chromium chromium-driver"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument("--window-size=1400,1000")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(20)  # elements appear once React has rendered; no fixed sleeps
    yield driver
    driver.quit()


def open_result(driver, report: Path, category: str, path: str):
    """Open ``report``, its ``category`` and the result ``path`` (the row's eye button)."""
    from selenium.webdriver.common.by import By

    driver.get(report.as_uri())
    driver.find_element(By.LINK_TEXT, category).click()
    cell = driver.find_element(By.XPATH, f"//td[text()='{path}']")
    cell.find_element(By.XPATH, "..//a[@iconname='eye']").click()


def test_the_report_is_one_self_contained_file(report):
    page = report.read_text()
    assert "smoke_sfa.html" in page
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", page)


def test_a_tables_numbers_are_visible(report, browser, smoke_run):
    from selenium.webdriver.common.by import By

    open_result(browser, report, "LIGHTYEAR", "results/report/tables/smoke_sfa.html")
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    try:
        rows = browser.find_elements(By.CSS_SELECTOR, "table.numbers tbody tr")
        shown = {
            r.find_elements(By.TAG_NAME, "td")[0].text: [
                td.text for td in r.find_elements(By.TAG_NAME, "td")[1:]
            ]
            for r in rows
        }
        caption = browser.find_element(By.CSS_SELECTOR, "p.caption").text
        settings = browser.find_element(By.CSS_SELECTOR, "table.settings").text
    finally:
        browser.switch_to.default_content()
    expected = table_rows((smoke_run / "tables/smoke_sfa.tex").read_text())
    assert list(expected) == ["Local", "FedAvg", "LIGHTYEAR"]
    assert shown == expected
    assert caption.startswith("smoke test -- SFA. Average test accuracy (%) ± std")
    assert "femnist_cnn" in settings


def test_the_figure_is_visible(report, browser):
    from selenium.webdriver.common.by import By

    open_result(browser, report, "LIGHTYEAR", "figures/smoke_robustness.png")
    image = browser.find_element(By.CSS_SELECTOR, "img[src^='data:image/png']")
    assert image.is_displayed()
    assert image.get_property("naturalWidth") > 500


def test_the_overview_says_everything_is_built(report, browser):
    from selenium.webdriver.common.by import By

    open_result(browser, report, "Overview", "results/report/status.html")
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    try:
        summary = browser.find_element(By.ID, "summary").text
    finally:
        browser.switch_to.default_content()
    assert summary == "4 of 4 targets built, 0 not built yet."


def test_a_partial_run_gets_a_report_that_lists_what_is_missing(smoke_run, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(smoke_run, partial, symlinks=True, ignore=shutil.ignore_patterns("report*"))
    (partial / "tables" / "smoke_ana.tex").unlink()
    out = partial / "partial.html"
    command = [benchlib_exe(), "html-report", "--config", str(REPO / "config" / "smoke.yaml")]
    command += ["-d", str(partial), "--out", str(out), "--snakefile", str(REPO / "Snakefile")]
    result = subprocess.run(command, env=tool_env(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    status = (partial / "results/report/status.html").read_text()
    assert "3 of 4 targets built, 1 not built yet." in status
    assert "<ul id=missing><li><code>tables/smoke_ana.tex</code></li></ul>" in status
    page = out.read_text()
    assert "smoke_sfa.html" in page and "smoke_ana.html" not in page
    assert not (partial / "tables" / "smoke_ana.tex").exists()  # nothing was trained or rendered
