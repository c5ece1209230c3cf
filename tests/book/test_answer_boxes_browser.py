"""The answer boxes of the rendered book, as a reader meets them in headless Chromium with the network cut off.

The book is the test run's one strict build (`book_html` in tests/book/conftest.py: `make book`'s build from the
notebooks' stored outputs, which nbval checks in the same run), served from 127.0.0.1 by a static file server started
here, and also opened from disk (file://), as `make book` tells a newcomer to open it. Every request to any other
address is aborted and recorded: none may happen. Typing an answer and pressing Enter or the button starts Python in
a Web Worker (Pyodide from the book's own _static/pyodide and the library zip built from the package) and prints the
verdict of `scaling_lib.book.exercises.checker.grade(..., page=True)`, which these tests compare with the checker run
here. A PerformanceObserver of long tasks, set up before the page's own scripts run, records every task over 50 ms
of the page's main thread; none during a first check may pass 200 ms. axe-core (pinned in package.json) audits two
chapters with verdicts on them.

Needs Debian's Chromium (`apt-get install -y chromium`) and npm (`apt-get install -y npm`); skipped without Chromium.
"""

import functools
import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scaling_lib.book.exercises import Choice, exercises, grade
from scaling_lib.book.exercises.index import label_for, scan_chapters, scan_notebook, toc_appendices
from tests import REPO
from tests.book.test_build import _wait_for_mathjax, browser  # noqa: F401  (the same headless Chromium fixture)

pytestmark = [pytest.mark.tiny]

VERDICT_TIMEOUT_MS = 120_000  # the first check starts Python in the page; on 2 shared cores that can take a while
LONGEST_TASK_MS = 200  # the longest main-thread task a first check may cause: no frozen page
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
LONG_TASKS = """window.bookLongTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.bookLongTasks.push([entry.startTime, entry.duration]);
}).observe({ type: "longtask", buffered: true });"""


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
    """A fresh page of the book at `site` (an http:// address or the build's file:// folder); every request elsewhere
    is aborted and recorded, and so are console errors and every request made (the worker's included)."""
    context = browser.new_context()
    context.add_init_script(LONG_TASKS)
    leaks, errors, requests = [], [], []
    context.route(re.compile(r"^(?!" + re.escape(site) + r"/).*"),
                  lambda route: (leaks.append(route.request.url), route.abort()))
    context.on("request", lambda request: requests.append(request.url))
    page = context.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exception: errors.append(str(exception)))
    page.goto(f"{site}/{path}", wait_until="load")
    return context, page, leaks, errors, requests


def _box(page, exercise_id):
    return page.locator(f'.answer-box[data-exercise-id="{exercise_id}"]')


def _answer(page, exercise_id, text, press_enter=True):
    """Type `text` into the box's first input, check (Enter or the button), and return the verdict shown."""
    box = _box(page, exercise_id)
    verdict = box.locator(".verdict")
    box.locator("input").first.fill(text)
    page.evaluate("(box) => { box.querySelector('.verdict').textContent = ''; }", box.element_handle())
    if press_enter:
        box.locator("input").first.press("Enter")
    else:
        box.locator(".answer-check").click()
    page.wait_for_function("(v) => v.textContent && !v.textContent.startsWith('Loading')",  # polled, not every
                           arg=verdict.element_handle(), timeout=VERDICT_TIMEOUT_MS, polling=100)  # frame
    return verdict.inner_text().strip()


def _settle(page) -> float:
    """Wait for the page's own start-up (MathJax typesetting, the theme's scripts) to finish and the main thread to
    fall idle, so that the long tasks measured next are the box's; return the time (performance.now(), ms)."""
    _wait_for_mathjax(page)
    return page.evaluate("() => new Promise((done) => requestIdleCallback(() => done(performance.now()), "
                         "{ timeout: 10000 }))")


def _long_tasks_since(page, start_ms: float) -> list:
    """Durations (ms) of the main thread's long tasks that ran after `start_ms` (performance.now())."""
    return [duration for begin, duration in page.evaluate("window.bookLongTasks") if begin + duration >= start_ms]


def _audit(page) -> list:
    """axe-core's serious and critical findings on the page as it stands: (rule, impact, first element)."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run()).violations.map((v) => [v.id, v.impact, v.nodes[0].html])")
    return [finding for finding in found if finding[1] in ("serious", "critical")]


def _page_words(verdict: str) -> None:
    """A verdict as the page words it: no notebook instruction, no [id] in front."""
    assert "replace None" not in verdict and "run the cell" not in verdict, verdict
    assert not re.match(r"^\[[\w.-]+\]", verdict), verdict


def _pages(book_html) -> dict:
    return {path.relative_to(book_html).with_suffix("").as_posix(): path.read_text(encoding="utf-8")
            for path in book_html.rglob("*.html") if not path.relative_to(book_html).parts[0].startswith("_")}


def test_every_checked_exercise_has_a_box_and_the_boxes_are_the_registry(book_html):
    pages = _pages(book_html)
    boxes = [(found, page) for page, text in pages.items()
             for found in re.findall(r'<div class="answer-box" data-exercise-id="([^"]+)"', text)]
    assert len(boxes) == len({found for found, _ in boxes}), "an exercise has two boxes"
    assert {found for found, _ in boxes} == set(exercises()), "the registry and the boxes in the HTML differ"
    where = dict(boxes)
    rows = [row for row in scan_chapters(REPO / "chapters") if row.check_id]
    rows += [row for stem in toc_appendices(REPO / "_toc.yml") for row in scan_notebook(REPO / "book" /
                                                                                          f"{stem}.ipynb")
             if row.check_id]
    assert len(rows) == len(exercises()) and len([row for row in rows if row.check_id.startswith("wp.")]) >= 12
    for row in rows:  # each in its own page, found by the one label rule
        assert where[row.check_id].endswith(row.chapter) and row.label == label_for(row.check_id), row
    for exercise_id, exercise in exercises().items():
        page = pages[where[exercise_id]]
        shown = re.search(rf'data-exercise-id="{re.escape(exercise_id)}"(.*?)<div class="verdict" role="status" '
                          r'aria-live="polite">', page, re.S).group(1)
        for part in exercise.parts:  # unit, band and rounding before the first try; every choice group named
            if isinstance(part, Choice):
                assert re.search(r"<fieldset [^>]*><legend>[^<]+: pick one</legend>", shown), exercise_id
            else:
                assert part.rule in shown and (not part.unit or f'"answer-unit">{part.unit}<' in shown), exercise_id
                assert "()" not in shown and f'value="{part.expected()}' not in page  # no empty unit, no answer
    for page in {page for _, page in boxes}:  # a way past the navigation to the exercises, and what the boxes do
        assert '<a class="reference internal" href="#answer-boxes-note">Jump to the exercises</a>' in pages[page]
        assert 'id="answer-boxes-note"' in pages[page]


def _first_check(browser, site, path, exercise_id, answer):
    """Open `path` afresh, let its start-up finish, answer the box once: the page (and what `_open` records), the
    verdict, and the main thread's long tasks (ms) from the first keystroke to the verdict."""
    context, page, leaks, errors, requests = _open(browser, site, path)
    box = _box(page, exercise_id)
    assert not any("pyodide" in url for url in requests), "Pyodide was loaded before any box was used"
    assert not box.locator(".answer-solution").is_visible()
    start = _settle(page)
    verdict = _answer(page, exercise_id, answer)
    return (context, page, leaks, errors, requests), verdict, _long_tasks_since(page, start)


def test_chapter_4_judges_in_a_worker_without_freezing_the_page_and_links_the_solution(browser, site):
    """The main thread's longest task during a first check stays under 200 ms, in the best of two fresh first checks:
    on the shared 2-core machine under load, the main thread's tasks of 12 to 18 ms of CPU took 100 to 120 ms of wall
    time waiting for a core (a Chrome trace at load average 9; see the README), and one of 330 ms was seen at load
    average 17; Python on the main thread froze the page for seconds at every first check, which two tries do not
    hide."""
    exercise_id = "ch4.kv-per-token-llama3-70b"
    opened, right, blocking = _first_check(browser, site, "chapters/04_memory.html", exercise_id, "328")
    if any(ms > LONGEST_TASK_MS for ms in blocking):
        opened[0].close()
        opened, right, again = _first_check(browser, site, "chapters/04_memory.html", exercise_id, "328")
        blocking = min(blocking, again, key=lambda tasks: max(tasks, default=0))
    context, page, leaks, errors, requests = opened
    try:
        box = _box(page, exercise_id)
        assert all(ms <= LONGEST_TASK_MS for ms in blocking), f"the first check froze the page: {blocking} ms"
        assert right == grade(exercise_id, "328", page=True).message and grade(exercise_id, "328").correct
        wrong = _answer(page, exercise_id, "656", press_enter=False)
        assert wrong == grade(exercise_id, "656", page=True).message and not grade(exercise_id, "656").correct
        assert "328" not in wrong  # the verdict never states the expected value
        for verdict in (right, wrong, _answer(page, exercise_id, "")):
            _page_words(verdict)
        long = _answer(page, exercise_id, "9" * 10_000)
        assert len(long) < 500 and "cut" in long
        # An edit greys the verdict out; after a wrong try a link opens the folded solution, the others stay folded.
        box.locator("input").fill("32")
        assert box.locator(".verdict.verdict-stale").count() == 1 and box.locator(".verdict-wrong").count() == 0
        solutions = page.locator("div.solution")
        assert solutions.count() >= 4
        box.locator(".answer-solution").click()
        solution = page.locator(f'[id="{box.get_attribute("data-solution")}"]')
        solution.locator("#solution-content").wait_for(state="visible", timeout=5000)
        bodies = page.locator("div.solution > :not(.admonition-title)")
        visible = [i for i in range(bodies.count()) if bodies.nth(i).is_visible()]
        assert len(visible) == 1, "only the linked solution opens"
        assert _audit(page) == []
        assert any(url.endswith("/_static/pyodide/pyodide.asm.wasm") for url in requests)
        assert any(url.endswith("/_static/answer_boxes/scaling_lib.zip") for url in requests)
        assert not leaks, f"requests left the page: {leaks}"
        assert not errors, f"console errors: {errors}"
    finally:
        context.close()


def test_chapter_1_judges_a_multi_part_answer_with_named_parts_and_passes_the_audit(browser, site):
    exercise_id = "ch1.matmul-time-v5e"
    exercise = exercises()[exercise_id]
    context, page, leaks, errors, _ = _open(browser, site, "chapters/01_rooflines.html")
    try:
        box = _box(page, exercise_id)
        assert box.locator("input").count() >= len(exercise.parts)
        for legend in page.locator("fieldset.answer-choice > legend").all_inner_texts():  # every choice group named
            assert legend.strip() and page.get_by_role("group", name=legend.strip(), exact=True).count() >= 1
        time_part = exercise.parts[0]
        right_time = f"{time_part.expected() * 1e3:.4g} ms"
        answers = {}
        for part in exercise.parts:
            if hasattr(part, "correct"):
                box.locator(f'input[type="radio"][value="{part.correct}"]').check()
                answers[part.name] = part.correct
        right = _answer(page, exercise_id, right_time)
        answers[time_part.name] = right_time
        assert right == grade(exercise_id, answers, page=True).message and grade(exercise_id, answers).correct
        wrong_time = f"{time_part.expected() * 2e3:.4g} ms"
        answers[time_part.name] = wrong_time
        wrong = _answer(page, exercise_id, wrong_time)
        assert wrong == grade(exercise_id, answers, page=True).message and not grade(exercise_id, answers).correct
        for part in exercise.parts:
            assert f"\n  {part.heading}: " in wrong
        _page_words(wrong)
        assert _audit(page) == []
        assert not leaks, f"requests left the page: {leaks}"
        assert not errors, f"console errors: {errors}"
    finally:
        context.close()


def test_the_boxes_work_in_a_book_opened_from_disk(browser, book_html):
    """Chromium refuses to fetch from file://; the worker loads the binaries' script wrappings instead."""
    context, page, leaks, errors, _ = _open(browser, book_html.as_uri(), "book/worked_problems.html")
    try:
        exercise_id = "wp.q2-max-batch"
        answer = str(exercises()[exercise_id].answer.expected())
        verdict = _answer(page, exercise_id, answer)
        assert verdict == grade(exercise_id, answer, page=True).message and grade(exercise_id, answer).correct
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
