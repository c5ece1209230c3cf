// Answer boxes and the estimate form (book/_ext/answer_boxes.py): the book's own Python, run in a Web Worker.
// Pyodide and the library are loaded from this book's _static folder, in a worker started when a reader focuses a box
// or the form (or a box comes into view while the page is idle); the page's own thread never runs Python, so it never
// freezes. No request leaves the site. A box's verdict is `scaling_lib.book.exercises.checker.grade(..., page=True)`'s
// message, `check`'s verdict in the page's words; the form's output is
// `scaling_lib.your_model.estimate_deployment(...).table`, what `python -m scaling_lib estimate` prints for the same
// inputs. Opened from disk (file://), where Chromium refuses to fetch, the worker loads the binaries from their script
// wrappings (`<name>.js`, written by the build) instead.
(function () {
  "use strict";
  const here = new URL(".", document.currentScript.src);  // .../_static/answer_boxes/
  const pyodideURL = new URL("../pyodide/", here);
  const libraryURL = new URL("scaling_lib.zip", here);
  const SERVE = "python3 -m http.server -d _build/html, then open http://127.0.0.1:8000";

  const PYTHON = `
import json, sys
sys.path.insert(0, "/home/pyodide/book_library")
from scaling_lib.book.exercises.checker import grade
from scaling_lib.your_model import estimate_deployment


def _answer_box_grade(exercise_id, answer_json):
    verdict = grade(exercise_id, json.loads(answer_json), page=True)
    return json.dumps([verdict.correct, verdict.message, any(part.answered for part in verdict.parts)])


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
        layout = fields.pop("moe_layout", "").split("+")  # "", "ep", "dp" or "ep+dp"
        kwargs = {name: _number(value) if name not in ("weight_dtype", "kv_dtype", "compute_dtype", "engine")
                  else value for name, value in fields.items() if value != ""}
        kwargs.update(expert_parallel="ep" in layout, attention_data_parallel="dp" in layout)
        estimate = estimate_deployment(None if config else model, chip, chips,
                                       config=json.loads(config) if config else None, **kwargs)
        return json.dumps([True, estimate.table])
    except (ValueError, TypeError) as error:  # json.JSONDecodeError is a ValueError
        return json.dumps([False, "error: " + " ".join(str(error).split())])
    except RecursionError:  # json.loads on a config nested thousands of levels deep
        return json.dumps([False, "error: the pasted config is nested too deeply to read; paste the model's "
                                  "config.json as it is published"])
`;

  // The worker's whole program. It runs from a Blob (a page opened from file:// may not start a worker from a file),
  // so it closes over nothing: what it needs comes in the "start" message.
  function worker() {
    let python = null;

    function bytesOf(base64) {
      if (Uint8Array.fromBase64) return Uint8Array.fromBase64(base64);
      const text = atob(base64);
      const bytes = new Uint8Array(text.length);
      for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
      return bytes;
    }

    // From file://, where fetch fails: answer each fetch from the file's script wrapping (`<url>.js`, written by the
    // build), loaded on the first fetch of that file; a file with no wrapping fails as its fetch would have.
    function serveWrappedFiles() {
      self.bookFiles = self.bookFiles || {};
      self.fetch = async (resource) => {
        const url = String(resource.url || resource).split(/[?#]/)[0];
        const name = url.split("/").pop();
        if (!(name in self.bookFiles)) importScripts(url + ".js");
        const type = name.endsWith(".wasm") ? "application/wasm" : "application/octet-stream";
        return new Response(bytesOf(self.bookFiles[name]), { headers: { "Content-Type": type } });
      };
    }

    async function start({ pyodideURL, libraryURL, fromFile, program }) {
      if (fromFile) serveWrappedFiles();
      importScripts(pyodideURL + "pyodide.js");
      const pyodide = await self.loadPyodide({ indexURL: pyodideURL, stdout: () => {}, stderr: () => {} });
      const response = await fetch(libraryURL);
      if (!response.ok) throw new Error("could not load " + libraryURL);
      pyodide.unpackArchive(await response.arrayBuffer(), "zip", { extractDir: "/home/pyodide/book_library" });
      pyodide.runPython(program);
      return pyodide;
    }

    self.onmessage = async (event) => {
      const message = event.data;
      if (message.kind === "start") {
        try {
          python = await start(message);
          self.postMessage({ kind: "ready" });
        } catch (error) {
          self.postMessage({ kind: "failed", error: String((error && error.message) || error) });
        }
        return;
      }
      try {
        const result = python.globals.get(message.name)(...message.args);
        self.postMessage({ kind: "result", id: message.id, result: result });
      } catch (error) {
        self.postMessage({ kind: "result", id: message.id, error: String((error && error.message) || error) });
      }
    };
  }

  let ready = null;  // the promise of a function call(name, ...args) -> promise of the Python function's JSON result

  function startPython() {
    if (ready !== null) return ready;
    ready = new Promise((resolve, reject) => {
      const pending = new Map();
      let nextId = 0;
      const source = "(" + worker.toString() + ")();";
      let thread;
      try {
        thread = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })));
      } catch (error) {
        reject(error);
        return;
      }
      const call = (name, ...args) => new Promise((done, fail) => {
        const id = nextId++;
        pending.set(id, { done, fail });
        thread.postMessage({ kind: "call", id: id, name: name, args: args });
      });
      thread.onmessage = (event) => {
        const message = event.data;
        if (message.kind === "ready") resolve(call);
        else if (message.kind === "failed") reject(new Error(message.error));
        else if (message.kind === "result") {
          const { done, fail } = pending.get(message.id);
          pending.delete(message.id);
          if ("error" in message) fail(new Error(message.error));
          else done(JSON.parse(message.result));
        }
      };
      thread.onerror = (event) => reject(new Error(event.message || "the worker stopped"));
      thread.postMessage({ kind: "start", pyodideURL: pyodideURL.href, libraryURL: libraryURL.href,
                           fromFile: location.protocol === "file:", program: PYTHON });
    });
    ready.catch(() => { ready = null; });  // a later try starts afresh
    return ready;
  }

  // Run `use(call)` once Python is ready, showing progress (when it takes a moment) and failures in `output`.
  async function withPython(output, use) {
    let waiting = true;
    const timer = setTimeout(() => {
      if (waiting) output.textContent = "Loading Python into the page (the first time takes a few seconds)...";
    }, 50);
    let call;
    try {
      call = await startPython();
    } catch (error) {
      output.textContent = "Could not start Python in the page (" + error.message + "). Serve the book instead: " +
        SERVE + ".";
      return;
    } finally {
      waiting = false;
      clearTimeout(timer);
    }
    await use(call);
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
    const solution = box.querySelector(".answer-solution");
    verdict.classList.remove("verdict-right", "verdict-wrong", "verdict-stale");
    verdict.textContent = "";
    return withPython(verdict, async (call) => {
      let result;
      try {
        result = await call("_answer_box_grade", box.dataset.exerciseId, JSON.stringify(answerOf(box)));
      } catch (error) {
        verdict.textContent = "The checker failed (" + error.message + ").";
        return;
      }
      const [correct, message, answered] = result;
      verdict.textContent = message;
      verdict.classList.add(correct ? "verdict-right" : "verdict-wrong");
      if (solution && !correct && answered) solution.hidden = false;
    });
  }

  // An edit makes the verdict stale: greyed, and no longer green or orange.
  function markStale(box) {
    const verdict = box.querySelector(".verdict");
    if (verdict.classList.contains("verdict-right") || verdict.classList.contains("verdict-wrong")) {
      verdict.classList.remove("verdict-right", "verdict-wrong");
      verdict.classList.add("verdict-stale");
    }
  }

  // Open the folded solution (sphinx-togglebutton hides its body behind a button in its title) and go to it.
  function openSolution(event, box) {
    const solution = document.getElementById(box.dataset.solution);
    if (!solution) return;
    event.preventDefault();
    const toggle = solution.querySelector(".toggle-button");
    if (toggle && solution.classList.contains("toggle-hidden")) toggle.click();
    solution.scrollIntoView({ block: "start" });
    (toggle || solution).focus({ preventScroll: true });
  }

  function estimate(form) {
    const output = form.querySelector(".estimate-output");
    const fields = {};
    form.querySelectorAll("input, select, textarea").forEach((el) => { fields[el.name] = el.value.trim(); });
    return withPython(output, async (call) => {
      const [ok, text] = await call("_estimate", JSON.stringify(fields));
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

  // Start Python before the first check: when a reader focuses a box or the form, or when a box comes into view
  // and the page has nothing else to do.
  function prepareEarly(elements) {
    elements.forEach((element) => element.addEventListener("focusin", () => startPython().catch(() => {}),
                                                           { once: true }));
    if (!("IntersectionObserver" in window)) return;
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 200));
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) {
        observer.disconnect();
        idle(() => startPython().catch(() => {}));
      }
    });
    elements.forEach((element) => observer.observe(element));
  }

  function wire() {
    const boxes = document.querySelectorAll(".answer-box[data-exercise-id]");
    boxes.forEach((box) => {
      box.querySelector(".answer-check").addEventListener("click", () => check(box));
      onEnter(box, () => check(box));
      box.addEventListener("input", () => markStale(box));
      const link = box.querySelector(".answer-solution");
      if (link) link.addEventListener("click", (event) => openSolution(event, box));
    });
    const forms = document.querySelectorAll("form.estimate-form");
    forms.forEach((form) => {
      form.querySelector("button").addEventListener("click", () => estimate(form));
      onEnter(form, () => estimate(form));
    });
    prepareEarly([...boxes, ...forms]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
