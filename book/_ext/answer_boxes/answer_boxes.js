// Answer boxes (book/_ext/answer_boxes.py): judge a reader's answer in the page with the book's own checker.
// Pyodide and the library are loaded from this book's _static folder on the first check only; no request leaves
// the site. The verdict is `scaling_lib.book.exercises.checker.grade`'s message, as `check` prints it.
(function () {
  "use strict";
  const here = new URL(".", document.currentScript.src);  // .../_static/answer_boxes/
  const pyodideURL = new URL("../pyodide/", here);
  const libraryURL = new URL("scaling_lib.zip", here);
  let ready = null;  // the promise of a function (exercise id, answer JSON) -> [correct, message]

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
    pyodide.runPython([
      "import json, sys",
      "sys.path.insert(0, '/home/pyodide/book_library')",
      "from scaling_lib.book.exercises.checker import grade",
      "def _answer_box_grade(exercise_id, answer_json):",
      "    verdict = grade(exercise_id, json.loads(answer_json))",
      "    return json.dumps([verdict.correct, verdict.message])",
    ].join("\n"));
    const judge = pyodide.globals.get("_answer_box_grade");
    window.bookPyodide = pyodide;  // for the browser tests and the estimate form
    return (id, answer) => JSON.parse(judge(id, JSON.stringify(answer)));
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

  async function check(box) {
    const verdict = box.querySelector(".verdict");
    verdict.classList.remove("verdict-right", "verdict-wrong");
    if (ready === null) {
      verdict.textContent = "Loading Python into the page (the first check takes a few seconds)...";
      ready = start();
    }
    let judge;
    try {
      judge = await ready;
    } catch (error) {
      ready = null;
      verdict.textContent = "Could not start Python in the page (" + error.message + "). Browsers do not let a " +
        "page opened from a file load WebAssembly: serve the book, e.g. python -m http.server -d _build/html.";
      return;
    }
    const [correct, message] = judge(box.dataset.exerciseId, answerOf(box));
    verdict.textContent = message;
    verdict.classList.add(correct ? "verdict-right" : "verdict-wrong");
  }

  function wire() {
    document.querySelectorAll(".answer-box[data-exercise-id]").forEach((box) => {
      box.querySelector("button").addEventListener("click", () => check(box));
      box.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && event.target.tagName === "INPUT") {
          event.preventDefault();
          check(box);
        }
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
