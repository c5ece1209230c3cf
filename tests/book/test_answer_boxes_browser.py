"""The answer boxes of the rendered book, as a reader meets them in headless Chromium with the network cut off.

The book is the test run's one strict build (`book_html` in tests/book/conftest.py: `make book`'s build from the
notebooks' stored outputs, which nbval checks in the same run) and is served from 127.0.0.1 by a static file server started here (browsers refuse to load WebAssembly into a page opened from a file).
Every request to any other address is aborted and recorded: none may happen. Typing an answer and pressing Enter or
the button loads Pyodide from the book's own _static/pyodide, the library zip built from the package, and prints the
verdict of `scaling_lib.book.exercises.checker.grade`, which these tests compare with the checker run here.

Needs Debian's Chromium (`apt-get install -y chromium`) and npm (`apt-get install -y npm`); skipped without Chromium.
"""

import functools
import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scaling_lib.book.exercises import exercises, grade
from scaling_lib.book.exercises.index import label_for, scan_chapters
from tests import REPO
from tests.book.test_build import browser  # noqa: F401  (the same headless Chromium fixture)

pytestmark = [pytest.mark.tiny]

VERDICT_TIMEOUT_MS = 120_000  # the first check starts Python in the page; on 2 shared cores that can take a while


class _Quiet(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm", ".js": "text/javascript"}

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(book_html):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(book_html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _open(browser, site, path):
    """A fresh page of the served book; every request elsewhere is aborted and recorded, and so are console errors
    and every request made (to tell whether Pyodide was loaded)."""
    context = browser.new_context()
    leaks, errors, requests = [], [], []
    context.route(re.compile(r"^(?!" + re.escape(site) + r"/).*"),
                  lambda route: (leaks.append(route.request.url), route.abort()))
    page = context.new_page()
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exception: errors.append(str(exception)))
    page.goto(f"{site}/{path}", wait_until="load")
    return context, page, leaks, errors, requests


def _answer(page, exercise_id, text, press_enter=True):
    """Type `text` into the box's first input, check (Enter or the button), and return the verdict shown."""
    box = page.locator(f'.answer-box[data-exercise-id="{exercise_id}"]')
    verdict = box.locator(".verdict")
    box.locator("input").first.fill(text)
    page.evaluate("(box) => { box.querySelector('.verdict').textContent = ''; }", box.element_handle())
    if press_enter:
        box.locator("input").first.press("Enter")
    else:
        box.locator("button").click()
    page.wait_for_function("(v) => v.textContent && !v.textContent.startsWith('Loading')",
                           arg=verdict.element_handle(), timeout=VERDICT_TIMEOUT_MS)
    return verdict.inner_text().strip()


def test_every_checked_exercise_of_the_chapters_has_a_box(book_html):
    rows = [row for row in scan_chapters(REPO / "chapters") if row.check_id]
    assert len(rows) >= 60
    pages = {path.stem: path.read_text(encoding="utf-8") for path in (book_html / "chapters").glob("*.html")}
    boxes = sum(len(re.findall(r'data-exercise-id="', html)) for html in pages.values())
    assert boxes >= 60
    for row in rows:
        assert f'data-exercise-id="{row.check_id}"' in pages[row.chapter], f"{row.check_id} has no box"
        assert label_for(row.check_id) == row.label
    for exercise_id, exercise in exercises().items():  # the box never carries the answer
        for part in exercise.parts:
            if hasattr(part, "correct"):
                continue
            assert f'value="{part.expected()}' not in "".join(pages.values())


def test_chapter_4_box_judges_328_right_and_656_wrong_offline(browser, site):
    context, page, leaks, errors, requests = _open(browser, site, "chapters/04_memory.html")
    try:
        exercise_id = "ch4.kv-per-token-llama3-70b"
        assert not any("pyodide" in url for url in requests), "Pyodide was loaded before any box was used"
        right = _answer(page, exercise_id, "328")
        assert right == grade(exercise_id, "328").message and grade(exercise_id, "328").correct
        wrong = _answer(page, exercise_id, "656", press_enter=False)
        assert wrong == grade(exercise_id, "656").message and not grade(exercise_id, "656").correct
        assert "328" not in wrong  # the verdict never states the expected value
        # Every folded solution is still folded.
        assert page.locator("div.solution").count() >= 4
        bodies = page.locator("div.solution > :not(.admonition-title)")
        assert not any(bodies.nth(i).is_visible() for i in range(bodies.count()))
        assert any(url.endswith("/_static/pyodide/pyodide.asm.wasm") for url in requests)
        assert any(url.endswith("/_static/answer_boxes/scaling_lib.zip") for url in requests)
        assert not leaks, f"requests left the page: {leaks}"
        assert not errors, f"console errors: {errors}"
    finally:
        context.close()


def test_a_second_chapter_judges_a_right_and_a_wrong_answer(browser, site):
    exercise_id = "ch1.matmul-time-v5e"
    exercise = exercises()[exercise_id]
    context, page, leaks, errors, _ = _open(browser, site, "chapters/01_rooflines.html")
    try:
        box = page.locator(f'.answer-box[data-exercise-id="{exercise_id}"]')
        assert box.locator("input").count() >= len(exercise.parts)
        time_part = exercise.parts[0]
        right_time = f"{time_part.expected() * 1e3:.4g} ms"
        answers = {}
        for part in exercise.parts:
            if hasattr(part, "correct"):
                box.locator(f'input[type="radio"][value="{part.correct}"]').check()
                answers[part.name] = part.correct
        right = _answer(page, exercise_id, right_time)
        answers[time_part.name] = right_time
        assert right == grade(exercise_id, answers).message and grade(exercise_id, answers).correct
        wrong_time = f"{time_part.expected() * 2e3:.4g} ms"
        answers[time_part.name] = wrong_time
        wrong = _answer(page, exercise_id, wrong_time)
        assert wrong == grade(exercise_id, answers).message and not grade(exercise_id, answers).correct
        assert not leaks, f"requests left the page: {leaks}"
        assert not errors, f"console errors: {errors}"
    finally:
        context.close()


def test_a_page_without_a_box_does_not_load_pyodide(browser, site, book_html):
    page_html = (book_html / "index.html").read_text(encoding="utf-8")
    assert "data-exercise-id" not in page_html and "answer_boxes.js" not in page_html
    context, page, leaks, errors, requests = _open(browser, site, "index.html")
    try:
        page.wait_for_timeout(500)
        assert not any("pyodide" in url or "answer_boxes" in url for url in requests)
        assert not leaks and not errors
    finally:
        context.close()


def _estimate_in_page(page, fields: dict) -> str:
    form = page.locator("form.estimate-form")
    for name, value in fields.items():
        control = form.locator(f'[name="{name}"]')
        if control.evaluate("(el) => el.tagName") == "SELECT":
            control.select_option(value)
        else:
            control.fill(value)
    output = form.locator(".estimate-output")
    page.evaluate("(el) => { el.textContent = ''; }", output.element_handle())
    form.locator("button").click()
    page.wait_for_function("(el) => el.textContent && !el.textContent.startsWith('Loading')",
                           arg=output.element_handle(), timeout=VERDICT_TIMEOUT_MS)
    return output.inner_text()


def test_estimate_form_prints_the_command_lines_table_for_two_deployments(browser, site):
    from scaling_lib.your_model import estimate_deployment

    config = REPO / "book" / "data" / "hf_configs" / "llama-2-7b.json"
    context, page, leaks, errors, _ = _open(browser, site, "book/your_model.html")
    try:
        shown = _estimate_in_page(page, {"model": "llama3-70b", "config": "", "chip": "h100", "chips": "8",
                                         "tensor_parallel": "4", "batch": "", "context_len": "8192",
                                         "weight_dtype": "fp8", "kv_dtype": "", "compute_dtype": "",
                                         "price_per_chip_hour": "2.5"})
        assert shown.strip() == estimate_deployment("llama3-70b", "h100", 8, tensor_parallel=4, context_len=8192,
                                                    weight_dtype="fp8", price_per_chip_hour=2.5).table.strip()
        shown = _estimate_in_page(page, {"config": config.read_text(), "chip": "tpu-v5e", "chips": "4",
                                         "tensor_parallel": "", "batch": "16", "context_len": "4096",
                                         "weight_dtype": "", "kv_dtype": "int8", "price_per_chip_hour": ""})
        assert shown.strip() == estimate_deployment(config=json.loads(config.read_text()), chip="tpu-v5e", n_chips=4,
                                                    batch=16, context_len=4096, kv_dtype="int8").table.strip()
        bad = _estimate_in_page(page, {"chips": "3", "tensor_parallel": "3"})  # 32 heads do not split 3 ways
        with pytest.raises(ValueError) as refused:
            estimate_deployment(config=json.loads(config.read_text()), chip="tpu-v5e", n_chips=3, tensor_parallel=3,
                                batch=16, context_len=4096, kv_dtype="int8")
        assert bad.strip() == "error: " + " ".join(str(refused.value).split())
        assert not leaks, f"requests left the page: {leaks}"
        assert not errors, f"console errors: {errors}"
    finally:
        context.close()
