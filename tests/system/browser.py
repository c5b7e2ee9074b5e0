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


def new_page(browser, width: int = 1400, height: int = 1000):
    """A page of `browser` whose events wait_idle can see (EVENTS, installed before any of the app's scripts)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(30_000)
    page.add_init_script(EVENTS)
    return page


@contextlib.contextmanager
def opened(url: str, width: int = 1400, height: int = 1000):
    """A page of the app at `url` in Chromium, `width` px wide, once it shows its title; closed with the block."""
    SHOTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        page = new_page(browser, width, height)
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


# Gradio's client asks the server for everything with fetch: each event joins the queue (its id in the answer) and
# ends with a "process_completed" message on the session's event stream (or a /cancel), an unqueued event is one
# request. Counted here, in the page, since many events show no progress at all (show_progress="hidden": a validator,
# a control shown for a method), and acting while one still runs races it.
EVENTS = r"""(() => {
    if (window.__events) return;
    const open = new Set(), ended = new Set(), state = window.__events = {open, requests: 0};
    const end = id => { ended.add(id); open.delete(id); };
    const pathOf = input => new URL(input instanceof Request ? input.url : String(input), location.href).pathname;
    const watchStream = async body => {
        const reader = body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
            const {value, done} = await reader.read();
            if (done) return;
            buffer += value;
            const messages = buffer.split(/\r?\n\r?\n/);
            buffer = messages.pop();
            for (const message of messages) for (const line of message.split(/\r?\n/)) {
                if (!line.startsWith('data:')) continue;
                try {
                    const data = JSON.parse(line.slice(5));
                    if (data.msg === 'process_completed' && data.event_id) end(data.event_id);
                } catch (e) { /* not JSON: a heartbeat */ }
            }
        }
    };
    const realFetch = window.fetch;
    window.fetch = async function (input, init) {
        const path = pathOf(input);
        if (path.endsWith('/queue/data')) {  // the session's event stream: read a copy of it
            const response = await realFetch.apply(this, arguments);
            if (!response.body) return response;
            const [mine, theirs] = response.body.tee();
            watchStream(mine).catch(() => {});
            return new Response(theirs, {status: response.status, statusText: response.statusText,
                                         headers: response.headers});
        }
        if (path.includes('/heartbeat')) return realFetch.apply(this, arguments);  // open for as long as the page
        state.requests += 1;
        try {
            const response = await realFetch.apply(this, arguments);
            if (path.endsWith('/queue/join') && response.ok) {
                const id = (await response.clone().json()).event_id;
                if (id && !ended.has(id)) open.add(id);
            } else if (path.endsWith('/cancel') && init && typeof init.body === 'string') {
                end(JSON.parse(init.body).event_id);
            }
            return response;
        } finally {
            state.requests -= 1;
        }
    };
})()"""


# an event still running, a request unanswered, or a component showing Gradio's progress ("processing | 1.2s",
# "queue: 2/3 | …", a bare timer)
BUSY = r"""() => window.__events.open.size + window.__events.requests > 0
    || [...document.querySelectorAll('.wrap')].some(el => el.offsetParent !== null && !el.classList.contains('hide')
        && /^(processing \| |queue: \d+\/\d+ \| )?[\d.]+s$/.test(el.innerText.trim()))"""


RUNNING = "() => ({events: [...window.__events.open], requests: window.__events.requests})"


def wait_idle(page, timeout: float = 30.0) -> None:
    """Until no event of the page runs (its progress shown or not: EVENTS) and no component shows Gradio's progress,
    for 0.5 s."""
    assert page.evaluate("() => window.__events !== undefined"), "a page that wait_idle can read comes from new_page"
    deadline, quiet_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if page.evaluate(BUSY):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 0.5:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the page was still busy after {timeout:.0f} s: {page.evaluate(RUNNING)}")


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
