"""What the browser tests share: Playwright's sync API (the tests skip without it), Debian's Chromium and its
flags, where screenshots go, and what a person does and sees on the page (open a tab, pick an option, type a
number, wait until the page is idle, check that no error shows, read a chart's traces)."""

from __future__ import annotations

import contextlib
import shutil
import time

import pytest
from helpers import REPO

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test needs `pip install playwright`")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# every browser test module's marks: skipped, saying how to get it, where Debian's Chromium is missing
BROWSER_MARKS = [pytest.mark.browser, pytest.mark.slow,
                 pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH (apt-get install chromium; .ci/run "
                                                             "does it)")]
expect = sync_api.expect

SHOTS = REPO / "tests" / "screenshots"
# no network here: without these Chromium waits on connection attempts (sync, updates, QUIC probes)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@contextlib.contextmanager
def opened(url: str, width: int = 1400, height: int = 1000):
    """A page of the app at `url` in Chromium, `width` px wide, once it shows its title; closed with the block."""
    SHOTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(30_000)
        page.goto(url)
        expect(page.get_by_role("heading", name="Transformer Playground")).to_be_visible(timeout=60_000)
        yield page
        browser.close()


# ----------------------------------------------------------------------------------------------------------
# What a person does and sees


def shot(page, name: str) -> None:
    page.mouse.move(1, 1)  # no hover highlight on the button just clicked
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name).click()
    expect(page.get_by_role("tab", name=name)).to_have_attribute("aria-selected", "true")


def choose(page, label: str, option: str) -> None:
    """Pick an option of a Gradio dropdown (in the visible tab) by its shown text."""
    page.get_by_role("combobox", name=label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    expect(page.get_by_role("combobox", name=label, exact=True)).to_have_value(option)


def type_number(page, label: str, value) -> None:
    box = page.get_by_role("spinbutton", name=label, exact=True)
    box.fill(str(value))
    box.press("Tab")
    expect(box).to_have_value(str(value))


BUSY = r"""() => [...document.querySelectorAll('.wrap')].some(el => el.offsetParent !== null
    && !el.classList.contains('hide') && /^(processing \| |queue: \d+\/\d+ \| )?[\d.]+s$/.test(el.innerText.trim()))"""


def wait_idle(page, timeout: float = 30.0) -> None:
    """Until no component shows Gradio's progress ("processing | 1.2s", "queue: 2/3 | …", a bare timer) for 0.5 s."""
    deadline, quiet_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if page.evaluate(BUSY):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 0.5:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the page was still busy after {timeout:.0f} s")


def no_error_toasts(page) -> None:
    errors = page.locator(".toast-body.error")
    assert errors.count() == 0, errors.all_inner_texts()


PLOT_TRACES = """title => {
    for (const el of document.querySelectorAll('.js-plotly-plot')) {
        const t = el.layout && el.layout.title;
        const text = t && (typeof t === 'string' ? t : t.text);
        if (text === title) return el.data.map(d => ({name: d.name, type: d.type || 'scatter', n: (d.x || []).length,
                                                        m: (d.y || []).length, x: Array.from(d.x || []).slice(0, 50)}));
    }
    return null;
}"""

# remembers every distinct state of the loss chart (points in its first trace, length of the SVG path actually drawn
# for it), so that a run that is over between two Python polls is still seen growing
RECORD_LOSS_CHART = """() => {
    window.__lossSeen = [];
    const read = () => {
        for (const el of document.querySelectorAll('.js-plotly-plot')) {
            const t = el.layout && el.layout.title;
            if ((t && (typeof t === 'string' ? t : t.text)) !== 'Loss') continue;
            const path = el.querySelector('.scatterlayer .trace path.js-line');
            return [el.data.length ? el.data[0].x.length : 0, path ? (path.getAttribute('d') || '').length : 0];
        }
        return [-1, 0];
    };
    window.__lossTimer = setInterval(() => {
        const now = read(), seen = window.__lossSeen, last = seen[seen.length - 1];
        if (!last || last[0] !== now[0] || last[1] !== now[1]) seen.push(now);
    }, 25);
}"""


def traces(page, title: str):
    return page.evaluate(PLOT_TRACES, title)


# Gradio's status tracker shows a red "Error" badge on every output of a handler that raised
ERROR_BADGES = """() => [...document.querySelectorAll('.wrap span.error')]
    .filter(el => el.offsetParent !== null && el.innerText.trim()).length"""


def no_error_badges(page) -> None:
    wait_idle(page)
    assert page.evaluate(ERROR_BADGES) == 0, "a component shows an error badge"
    no_error_toasts(page)


def refused(page, where: str, message) -> None:
    """After a refused action: its message stays readable at `where` and no component is marked as failed."""
    expect(page.locator(where)).to_contain_text(message)
    no_error_badges(page)


def key_column_visible(page, grid: str, column: str, min_width: int = 150) -> None:
    """The column is on screen inside its table, wide enough to read, without scrolling sideways."""
    table = page.get_by_role("grid", name=grid)
    header = table.get_by_role("columnheader", name=column)
    expect(header).to_be_visible()
    box, outer = header.bounding_box(), table.bounding_box()
    width = page.viewport_size["width"]
    assert box["width"] >= min_width, (grid, column, box)
    assert outer["x"] - 1 <= box["x"] and box["x"] + box["width"] <= min(outer["x"] + outer["width"], width) + 1, \
        (grid, column, box, outer, width)
