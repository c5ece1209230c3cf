"""How long a reader waits for the first verdict of an answer box: first click to verdict, in headless Chromium.

Not a test (no assertion on time). Serves the built book (`make book` first) from 127.0.0.1, opens chapter 4 in a
fresh browser context each run (so Pyodide, the standard library and the library zip are fetched, compiled and
imported again: what a reader pays on a page's first check), types 328 into the box for
ch4.kv-per-token-llama3-70b, presses Check and times until the verdict appears; then times a second check on the
same page (Python already loaded). Prints the median and range of each. Every request to another address is aborted.

    .venv/bin/python bench/bench_pyodide.py [runs]
"""

import functools
import re
import shutil
import statistics
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
PAGE = "chapters/04_memory.html"
EXERCISE = "ch4.kv-per-token-llama3-70b"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]

TIME_CHECK = """async ([id, answer]) => {
  const box = document.querySelector(`.answer-box[data-exercise-id="${id}"]`);
  const verdict = box.querySelector('.verdict');
  verdict.textContent = '';
  box.querySelector('input').value = answer;
  const start = performance.now();
  box.querySelector('button').click();
  await new Promise((resolve) => {
    const poll = () => (verdict.textContent && !verdict.textContent.startsWith('Loading')) ? resolve()
                                                                                           : setTimeout(poll, 5);
    poll();
  });
  return [performance.now() - start, verdict.textContent];
}"""


class _Quiet(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm"}

    def log_message(self, *args):
        pass


def main(runs: int = 5) -> None:
    if not (HTML / PAGE).is_file():
        sys.exit("build the book first: make book")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(HTML)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_address[1]}"
    first, second, leaks = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        for _ in range(runs):
            context = browser.new_context()
            context.route(re.compile(r"^(?!" + re.escape(site) + r"/).*"),
                          lambda route: (leaks.append(route.request.url), route.abort()))
            page = context.new_page()
            page.goto(f"{site}/{PAGE}", wait_until="load")
            ms, verdict = page.evaluate(TIME_CHECK, [EXERCISE, "328"])
            first.append(ms)
            ms, _ = page.evaluate(TIME_CHECK, [EXERCISE, "656"])
            second.append(ms)
            context.close()
        browser.close()
    server.shutdown()
    print(f"verdict: {verdict}")
    for name, times in (("first click to first verdict", first), ("a later check on the same page", second)):
        print(f"{name}: median {statistics.median(times) / 1e3:.2f} s "
              f"(min {min(times) / 1e3:.2f}, max {max(times) / 1e3:.2f}; {runs} runs, fresh browser context each)")
    print(f"requests to other addresses: {len(leaks)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
