"""How long a reader waits for the first verdict of an answer box, and how long the page's main thread is blocked
meanwhile: in headless Chromium, served over http and opened from disk (file://).

Not a test (no assertion on time). Opens chapter 4 of the built book (`make book` first) in a fresh browser context
each run (so Pyodide, the standard library and the library zip are fetched, compiled and imported again: what a
reader pays on a page's first check). Like a reader, it clicks into the box for ch4.kv-per-token-llama3-70b (which
starts Python in a Web Worker), types 328 at about 6 keys a second and presses Enter; it times the first verdict from
the click into the box and from Enter, then a second check on the same page. A PerformanceObserver of long tasks,
installed before the page's scripts run, records every main-thread task over 50 ms from the click to the verdict:
the longest is the page's longest freeze. Every request to another address is aborted.

    .venv/bin/python bench/bench_pyodide.py [runs]      (BOOK_HTML=folder times another build, e.g. the tests')
"""

import functools
import os
import re
import shutil
import statistics
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html")).resolve()
PAGE = "chapters/04_memory.html"
EXERCISE = "ch4.kv-per-token-llama3-70b"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
KEY_DELAY_MS = 150
LONG_TASKS = """window.benchLongTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.benchLongTasks.push([entry.startTime, entry.duration]);
}).observe({ type: "longtask", buffered: true });"""
WAIT_FOR_VERDICT = "(v) => v.textContent && !v.textContent.startsWith('Loading')"


class _Quiet(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm"}

    def log_message(self, *args):
        pass


def one_run(browser, site: str) -> dict:
    """Seconds from the click into the box and from Enter to the first verdict, the longest main-thread task (ms)
    and the number over 50 ms between the click and the verdict, and the seconds of a later check."""
    context = browser.new_context()
    context.add_init_script(LONG_TASKS)
    leaks = []
    context.route(re.compile(r"^(?!" + re.escape(site) + r"/).*"),
                  lambda route: (leaks.append(route.request.url), route.abort()))
    page = context.new_page()
    page.goto(f"{site}/{PAGE}", wait_until="load")
    # the page's own start-up (MathJax typesetting) is not the box's: wait for it and for an idle main thread
    page.wait_for_function("() => !document.querySelector(\"script[src*='mathjax']\") || (window.MathJax && "
                           "MathJax.startup && MathJax.startup.promise)", timeout=60_000)
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
    page.evaluate("() => new Promise((done) => requestIdleCallback(done, { timeout: 10000 }))")
    box = page.locator(f'.answer-box[data-exercise-id="{EXERCISE}"]')
    field, verdict = box.locator("input"), box.locator(".verdict")
    start_ms = page.evaluate("performance.now()")
    clicked = time.perf_counter()
    field.click()
    field.press_sequentially("328", delay=KEY_DELAY_MS)
    entered = time.perf_counter()
    field.press("Enter")
    page.wait_for_function(WAIT_FOR_VERDICT, arg=verdict.element_handle(), timeout=300_000, polling=100)
    done = time.perf_counter()
    tasks = [duration for begin, duration in page.evaluate("window.benchLongTasks") if begin + duration >= start_ms]
    first_verdict = verdict.inner_text()
    field.fill("656")
    later = time.perf_counter()
    field.press("Enter")
    page.wait_for_function("(v) => v.textContent.startsWith('Not yet')", arg=verdict.element_handle())
    result = {"from_click_s": done - clicked, "from_enter_s": done - entered, "longest_task_ms": max(tasks, default=0),
              "tasks_over_50ms": len(tasks), "later_s": time.perf_counter() - later, "verdict": first_verdict,
              "leaks": leaks}
    context.close()
    return result


def _summary(values, unit, digits=2) -> str:
    return (f"median {statistics.median(values):.{digits}f} {unit} (min {min(values):.{digits}f}, "
            f"max {max(values):.{digits}f})")


def main(runs: int = 5) -> None:
    if not (HTML / PAGE).is_file():
        sys.exit("build the book first: make book")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(HTML)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sites = {"served over http": f"http://127.0.0.1:{server.server_address[1]}", "opened from disk": HTML.as_uri()}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        for name, site in sites.items():
            results = [one_run(browser, site) for _ in range(runs)]
            print(f"{name} ({runs} runs, a fresh browser context each; first verdict: {results[0]['verdict']!r})")
            print(f"  first verdict, from the click into the box: {_summary([r['from_click_s'] for r in results], 's')}")
            print(f"  first verdict, from Enter (after typing 3 keys): "
                  f"{_summary([r['from_enter_s'] for r in results], 's')}")
            print(f"  longest main-thread task meanwhile: {_summary([r['longest_task_ms'] for r in results], 'ms', 0)}"
                  f"; tasks over 50 ms per first check: {_summary([r['tasks_over_50ms'] for r in results], '', 0)}")
            print(f"  a later check on the same page: {_summary([r['later_s'] for r in results], 's', 3)}")
            print(f"  requests to other addresses: {sum(len(r['leaks']) for r in results)}")
        browser.close()
    server.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
