// Answer boxes and the estimate form (book/_ext/answer_boxes.py): the book's own Python, run in the page.
// Pyodide and the library are loaded from this book's _static folder on the first check only; no request leaves
// the site. A box's verdict is `scaling_lib.book.exercises.checker.grade`'s message, as `check` prints it; the
// form's output is `scaling_lib.your_model.estimate_deployment(...).table`, what `python -m scaling_lib estimate`
// prints for the same inputs.
(function () {
  "use strict";
  const here = new URL(".", document.currentScript.src);  // .../_static/answer_boxes/
  const pyodideURL = new URL("../pyodide/", here);
  const libraryURL = new URL("scaling_lib.zip", here);
  let ready = null;  // the promise of {grade, estimate}: Python functions taking and returning JSON text

  const PYTHON = `
import json, sys
sys.path.insert(0, "/home/pyodide/book_library")
from scaling_lib.book.exercises.checker import grade
from scaling_lib.your_model import estimate_deployment


def _answer_box_grade(exercise_id, answer_json):
    verdict = grade(exercise_id, json.loads(answer_json))
    return json.dumps([verdict.correct, verdict.message])


def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text  # the library's own check names the field and what it expected


def _estimate(fields_json):
    fields = json.loads(fields_json)
    try:
        config, model = fields.pop("config").strip(), fields.pop("model", None)
        chip, chips = fields.pop("chip"), _number(fields.pop("chips"))
        kwargs = {name: _number(value) if name not in ("weight_dtype", "kv_dtype", "compute_dtype") else value
                  for name, value in fields.items() if value != ""}
        estimate = estimate_deployment(None if config else model, chip, chips,
                                       config=json.loads(config) if config else None, **kwargs)
        return json.dumps([True, estimate.table])
    except (ValueError, TypeError) as error:  # json.JSONDecodeError is a ValueError
        return json.dumps([False, "error: " + " ".join(str(error).split())])
`;

  function loadScript(url) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = resolve;
      script.onerror = () => reject(new Error("could not load " + url));
      document.head.appendChild(script);
    });
  }

  async function start() {
    await loadScript(new URL("pyodide.js", pyodideURL).href);
    const pyodide = await loadPyodide({ indexURL: pyodideURL.href, stdout: () => {}, stderr: () => {} });
    const response = await fetch(libraryURL.href);
    if (!response.ok) throw new Error("could not load " + libraryURL.href);
    pyodide.unpackArchive(await response.arrayBuffer(), "zip", { extractDir: "/home/pyodide/book_library" });
    pyodide.runPython(PYTHON);
    const call = (name) => { const f = pyodide.globals.get(name); return (...args) => JSON.parse(f(...args)); };
    window.bookPyodide = pyodide;
    return { grade: call("_answer_box_grade"), estimate: call("_estimate") };
  }

  // Run `use(python)` once Python is ready, showing progress and failures in `output`.
  async function withPython(output, use) {
    if (ready === null) {
      output.textContent = "Loading Python into the page (the first time takes a few seconds)...";
      ready = start();
    }
    let python;
    try {
      python = await ready;
    } catch (error) {
      ready = null;
      output.textContent = "Could not start Python in the page (" + error.message + "). Browsers do not let a " +
        "page opened from a file load WebAssembly: serve the book, e.g. python3 -m http.server -d _build/html.";
      return;
    }
    use(python);
  }

  function answerOf(box) {
    const parts = Array.from(box.querySelectorAll(".answer-part"));
    const values = parts.map((part) => {
      if (part.tagName === "FIELDSET") {
        const picked = part.querySelector("input:checked");
        return picked ? picked.value : null;
      }
      const text = part.querySelector("input").value.trim();
      return text === "" ? null : text;
    });
    if (parts.length === 1) return values[0];
    const answer = {};
    parts.forEach((part, i) => { answer[part.dataset.part] = values[i]; });
    return answer;
  }

  function check(box) {
    const verdict = box.querySelector(".verdict");
    verdict.classList.remove("verdict-right", "verdict-wrong");
    return withPython(verdict, (python) => {
      const [correct, message] = python.grade(box.dataset.exerciseId, JSON.stringify(answerOf(box)));
      verdict.textContent = message;
      verdict.classList.add(correct ? "verdict-right" : "verdict-wrong");
    });
  }

  function estimate(form) {
    const output = form.querySelector(".estimate-output");
    const fields = {};
    form.querySelectorAll("input, select, textarea").forEach((el) => { fields[el.name] = el.value.trim(); });
    return withPython(output, (python) => {
      const [ok, text] = python.estimate(JSON.stringify(fields));
      output.textContent = text;
      output.classList.toggle("estimate-error", !ok);
    });
  }

  function onEnter(element, action) {
    element.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && event.target.tagName === "INPUT") {
        event.preventDefault();
        action();
      }
    });
  }

  function wire() {
    document.querySelectorAll(".answer-box[data-exercise-id]").forEach((box) => {
      box.querySelector("button").addEventListener("click", () => check(box));
      onEnter(box, () => check(box));
    });
    document.querySelectorAll("form.estimate-form").forEach((form) => {
      form.querySelector("button").addEventListener("click", () => estimate(form));
      onEnter(form, () => estimate(form));
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
