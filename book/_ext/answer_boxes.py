"""A Sphinx extension: an answer box under every checked exercise, judged in the page by the book's own checker.

For every exercise directive whose label belongs to an exercise of the registry (`scaling_lib.book.exercises`;
one rule for every page: label = check id with "-ex-" for the first dot, `index.label_for`), the HTML gets, at the
end of the exercise:

    <div class="answer-box" data-exercise-id="ch4.kv-per-token-llama3-70b" data-solution="(the folded solution's id)">
      per numeric part a labelled <input>, its unit and its rule (band and rounding: `Number.rule`), or per choice a
      <fieldset> with a <legend>; a <button>; a verdict region (role="status", aria-live); a link to the solution
    </div>

A page with boxes also gets a "Jump to the exercises" link under its title and, before its first box, a note on how
the boxes work. Nothing about the answer is written into the page: the box knows the exercise id and the parts' names,
units and rules. answer_boxes.js starts a Web Worker when a reader focuses a box (or a box comes into view while the
page is idle); the worker loads Pyodide (CPython compiled to WebAssembly) from the book's own `_static/pyodide/`,
unpacks `_static/answer_boxes/scaling_lib.zip` into it and calls `checker.grade(..., page=True)`: the verdict of
`check` in a notebook, in the page's words. The page's own thread never runs Python, so it never freezes. Pages
without a box load nothing.

At the end of the build this extension copies Pyodide's core files from `node_modules/pyodide` (the npm package pinned
in package.json; `npm ci` is run when it is missing) and builds the zip from the installed package: the modules that
`scaling_lib.estimate`, `scaling_lib.your_model` and `scaling_lib.book.exercises` import, found by importing them
in a fresh interpreter where
numpy, jax and matplotlib cannot be imported (so a module that needs them fails the build instead of the page), plus
`scaling_lib/data`. Nothing is a copy kept by hand.

A book opened from disk (file://) cannot `fetch` the WebAssembly, the standard library or the zip (Chromium refuses
file:// requests), but a worker may load scripts from there. So each binary the worker fetches also goes into the
build as a script that holds it in base64 (`pyodide.asm.wasm.js`, ...: `WRAPPED`, about 15 MB in all); from file://
the worker loads those and answers its own fetches from them.
"""

import base64
import html
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

HERE = Path(__file__).parent
ASSETS = HERE / "answer_boxes"  # answer_boxes.js and .css, copied as they are
PYODIDE_FILES = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
WRAPPED = ("pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")  # fetched by Pyodide; wrapped for file://
STATIC = "answer_boxes"
LIBRARY_ZIP = "scaling_lib.zip"
ROOTS = ("scaling_lib.estimate", "scaling_lib.your_model", "scaling_lib.book.exercises")
BLOCKED = ("numpy", "jax", "jaxlib", "matplotlib")

# Run in a fresh interpreter: import ROOTS with BLOCKED unimportable, print the files of every scaling_lib module.
_CLOSURE = """
import importlib, json, sys
BLOCKED = {blocked!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: the page has no numpy, JAX or matplotlib")
sys.meta_path.insert(0, Block())
for root in {roots!r}:
    importlib.import_module(root)
print(json.dumps(sorted(m.__file__ for name, m in sys.modules.items()
                        if name.split(".")[0] == "scaling_lib" and getattr(m, "__file__", None))))
"""


def library_files() -> list:
    """(path in the zip, file) for every module the page imports, plus the package's data files."""
    code = _CLOSURE.format(blocked=BLOCKED, roots=ROOTS)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise ExtensionError("answer_boxes: the page's library does not import without numpy/JAX/matplotlib:\n"
                             + result.stderr[-3000:])
    files = [Path(name) for name in json.loads(result.stdout)]
    package = next(f.parent for f in files if f.name == "__init__.py" and f.parent.name == "scaling_lib")
    files += sorted(p for p in (package / "data").rglob("*") if p.is_file())
    return sorted((f.relative_to(package.parent).as_posix(), f) for f in files)


def _write_if_changed(target: Path, data: bytes) -> None:
    """Write `data` to `target` unless it already holds exactly these bytes (an incremental build keeps its files)."""
    if not (target.exists() and target.stat().st_size == len(data) and target.read_bytes() == data):
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_bytes(data)
        temporary.replace(target)


def script_wrapping(name: str, data: bytes) -> bytes:
    """A script that holds a binary file for a worker opened from file://, which may load scripts but not fetch:
    `self.bookFiles[name] = "<base64>"` (answer_boxes.js decodes it and serves it to its own fetches)."""
    encoded = base64.b64encode(data).decode("ascii")
    return (f"(self.bookFiles = self.bookFiles || {{}})[{json.dumps(name)}] = \"{encoded}\";\n").encode("ascii")


def write_library_zip(target: Path) -> None:
    """A deterministic zip (fixed timestamps, sorted) of `library_files()`, and its script wrapping beside it
    (`<name>.js`); each rewritten only when its bytes change."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in library_files():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    _write_if_changed(target, buffer.getvalue())
    _write_if_changed(target.with_name(target.name + ".js"), script_wrapping(target.name, buffer.getvalue()))


def _pyodide_folder(srcdir: Path) -> Path:
    folder = srcdir / "node_modules" / "pyodide"
    if not all((folder / name).is_file() for name in PYODIDE_FILES):
        npm = shutil.which("npm")
        if npm is None:
            raise ExtensionError("answer_boxes: Pyodide is not installed and npm is missing; install Node.js/npm "
                                 "(apt-get install -y npm) and run `npm ci` at the repository root")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=srcdir, check=True,
                       capture_output=True, timeout=600)
    missing = [name for name in PYODIDE_FILES if not (folder / name).is_file()]
    if missing:
        raise ExtensionError(f"answer_boxes: node_modules/pyodide lacks {missing}; check the version in package.json")
    return folder


def _registry() -> dict:
    """{exercise label: Exercise} for every registered exercise."""
    from scaling_lib.book.exercises import exercises
    from scaling_lib.book.exercises.index import label_for

    return {label_for(exercise_id): exercise for exercise_id, exercise in exercises().items()}


def _html_id(*words: str) -> str:
    """An HTML id from an exercise id and a part name: letters, digits and '-' only."""
    return "-".join("".join(c if c.isalnum() else "-" for c in word) for word in words if word)


def box_html(exercise, solution_id: str = "") -> str:
    """The box of one exercise: per part a labelled input with its unit and its rule (band and rounding) shown before
    any try, or a named group of options; a button; a verdict region the screen reader announces; and a link to the
    folded solution (`solution_id`), which the page shows after a wrong try."""
    from scaling_lib.book.exercises import Choice

    esc = html.escape
    parts = []
    for part in exercise.parts:
        name, heading = esc(part.name), esc(part.heading) or "Your answer"
        if isinstance(part, Choice):
            options = "".join(f'<label><input type="radio" name="{esc(exercise.id)}:{name}" value="{key}"> '
                              f"({key}) {esc(text)}</label>" for key, text in part.options.items())
            parts.append(f'<fieldset class="answer-part answer-choice" data-part="{name}">'
                         f"<legend>{heading}: pick one</legend>{options}</fieldset>")
        else:
            field = _html_id("answer", exercise.id, part.name)
            unit = f'<span class="answer-unit">{esc(part.unit)}</span>' if part.unit else ""
            asked = f"a number in {esc(part.unit)}, or with a unit" if part.unit else "a number"
            parts.append(f'<div class="answer-part" data-part="{name}"><label for="{field}">{heading}</label> '
                         f'<input type="text" id="{field}" data-part="{name}" autocomplete="off" spellcheck="false" '
                         f'inputmode="decimal" placeholder="{asked}" aria-describedby="{field}-rule">{unit} '
                         f'<span class="answer-rule" id="{field}-rule">{esc(part.rule)}</span></div>')
    solution = (f'<a class="answer-solution" href="#{esc(solution_id)}" hidden>Open the worked solution</a>'
                if solution_id else "")
    return (f'<div class="answer-box" data-exercise-id="{esc(exercise.id)}" data-solution="{esc(solution_id)}">'
            f'{"".join(parts)}<button type="button" class="answer-check">Check</button>'
            f'<div class="verdict" role="status" aria-live="polite"></div>{solution}</div>')


BOXES_NOTE = ("In this page, the box under each checked exercise judges your answer: type a number (in the unit shown, "
              "or with a unit of your own, such as 0.5 ms) or pick an option, then press Enter or Check. Each box "
              "shows its unit, the band it accepts and how to round before you try. The book's own checker runs in "
              "the page (Python in WebAssembly, started in the background the first time you use a box); nothing "
              "leaves the page. A verdict says right or wrong, too high or too low, and names a recognised slip; "
              "after a wrong try it links to the folded solution. The notebook's check cells are folded under the "
              "boxes.")


def _fold_check_cell(exercise_node, exercise_id: str) -> None:
    """Fold the notebook's check cell under a boxed exercise (`check("id", None)`, with its "replace None" verdict),
    as myst-nb folds a hide-cell cell: the box takes its place in the page, and the cell is one click away."""
    from myst_nb.sphinx_ import HideCodeCellNode

    parent = exercise_node.parent
    following = parent[parent.index(exercise_node) + 1:parent.index(exercise_node) + 3]
    cell = next((n for n in following if isinstance(n, nodes.container) and n.get("nb_element") == "cell_code"
                 and f'check("{exercise_id}"' in n.astext()), None)
    if cell is None or cell.get("hide_mode"):
        return
    fold = HideCodeCellNode(prompt_show="Show the notebook's check cell", prompt_hide="Hide the notebook's check cell")
    fold["classes"].append("above-input")
    children = list(cell.children)
    cell.clear()
    fold.extend(children)
    cell += fold


def _notes(doctree, first_box) -> None:
    """A "Jump to the exercises" link under the page's title, to a note placed before the first box's exercise."""
    note = nodes.paragraph("", BOXES_NOTE, classes=["answer-boxes-note"], ids=["answer-boxes-note"])
    first_box.parent.insert(first_box.parent.index(first_box), note)
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not section.children or not isinstance(section[0], nodes.title):
        return
    jump = nodes.paragraph("", "", classes=["jump-to-exercises"])
    jump += nodes.reference("", "Jump to the exercises", refid="answer-boxes-note", internal=True)
    section.insert(1, jump)


# The form's choice for a mixture of experts -> (its words, estimate_deployment's expert_parallel and
# attention_data_parallel); the worker's _estimate reads the same table from the value.
MOE_LAYOUTS = {"": "tensor parallel only", "ep": "expert parallel", "dp": "attention data-parallel",
               "ep+dp": "expert parallel, attention data-parallel"}
ESTIMATE_PAGE = "book/your_model"  # the appendix *Apply the book to your model* gets the estimate form


def estimate_form_html() -> str:
    """The estimate form: the fields of `scaling_lib.your_model.estimate_deployment` (those of `python -m scaling_lib
    estimate`), the lists of models, chips and formats taken from the library, and an output block for its table."""
    from scaling_lib.dtypes import BYTES_PER_ELEMENT
    from scaling_lib.efficiency import PROFILES
    from scaling_lib.hardware import chip_names
    from scaling_lib.models import model_names

    def select(name, options, selected, blank=None):
        """options: values, or (value, words) pairs."""
        pairs = [o if isinstance(o, tuple) else (o, o) for o in options]
        items = ([f'<option value="">{html.escape(blank)}</option>'] if blank else []) + [
            f'<option value="{html.escape(v)}"{" selected" if v == selected else ""}>{html.escape(w)}</option>'
            for v, w in pairs]
        return f'<select name="{name}">{"".join(items)}</select>'

    def field(label, control):
        return f'<label class="estimate-field">{label} {control}</label>'

    def number(name, value="", placeholder=""):
        return (f'<input type="text" name="{name}" value="{value}" placeholder="{html.escape(placeholder)}" '
                'inputmode="decimal" autocomplete="off">')

    dtypes = sorted(BYTES_PER_ELEMENT)
    return "".join([
        '<form class="estimate-form" onsubmit="return false">',
        field("model", select("model", model_names(), "llama3-70b")),
        field("or paste its <code>config.json</code> (used when not empty)",
              '<textarea name="config" rows="4" spellcheck="false"></textarea>'),
        field("chip", select("chip", chip_names(), "h100")),
        field("chips", number("chips", "8")),
        field("tensor parallel", number("tensor_parallel", "", "the default layout")),
        field("batch", number("batch", "", "the largest that fits")),
        field("context (tokens)", number("context_len", "", "8192, or the config's limit")),
        field("weights", select("weight_dtype", dtypes, None, blank="the config's format, else the model's own")),
        field("KV cache", select("kv_dtype", dtypes, None, blank="report's default")),
        field("math", select("compute_dtype", dtypes, None, blank="the weights' own where the chip has it, else bf16")),
        field("price ($ per chip-hour)", number("price_per_chip_hour", "", "none")),
        field("engine", select("engine", tuple(PROFILES), "typical")),
        field("a mixture of experts", select("moe_layout", tuple(MOE_LAYOUTS.items())[1:], None,
                                             blank=MOE_LAYOUTS[""])),
        '<button type="button" class="estimate-run">Estimate</button>',
        '<pre class="estimate-output" aria-live="polite"></pre></form>'])


def _estimate_section(document) -> nodes.section:
    section = nodes.section(ids=["estimate-in-the-page"], names=["estimate in the page"])
    section += nodes.title("", "Estimate in the page")
    section += nodes.paragraph("", "The table python -m scaling_lib estimate prints, for a deployment of your choice, "
                                   "computed by the same library function in this page (Python in WebAssembly, loaded "
                                   "on the first click; nothing leaves the page). A pasted config.json's formats are "
                                   "used unless you pick others, and its position limit is enforced.")
    section += nodes.raw("", estimate_form_html(), format="html")
    top = [child for child in document.children if isinstance(child, nodes.section)]
    (top[-1] if top else document).append(section)  # a subsection of the page's one top-level section
    return section


def _insert_boxes(app, doctree, docname):
    if app.builder.format != "html":
        return
    if docname == ESTIMATE_PAGE:
        _estimate_section(doctree)
    from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node, solution_node

    registry = _registry()
    solutions = {node.get("target_label"): node["ids"][0] for node in doctree.findall(solution_node)
                 if node.get("ids")}
    boxed = []
    for node in list(doctree.findall(lambda n: isinstance(n, (exercise_node, exercise_enumerable_node)))):
        label = node.get("label", "")
        exercise = registry.get(label)
        if exercise is not None:
            node += nodes.raw("", box_html(exercise, solutions.get(label, "")), format="html")
            _fold_check_cell(node, exercise.id)
            boxed.append(node)
    if boxed:
        _notes(doctree, boxed[0])


def _add_script_where_needed(app, pagename, templatename, context, doctree):
    body = context.get("body", "")
    if 'class="answer-box"' in body or 'class="estimate-form"' in body:
        app.add_js_file(f"{STATIC}/answer_boxes.js")
        app.add_css_file(f"{STATIC}/answer_boxes.css")


def _copy_if_changed(source: Path, target: Path) -> None:
    if not target.exists() or target.stat().st_size != source.stat().st_size or \
            target.read_bytes() != source.read_bytes():
        shutil.copyfile(source, target)


def _copy_assets(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    pyodide = _pyodide_folder(Path(app.srcdir))
    (static / "pyodide").mkdir(parents=True, exist_ok=True)
    for name in PYODIDE_FILES:
        _copy_if_changed(pyodide / name, static / "pyodide" / name)
    for name in WRAPPED:
        _write_if_changed(static / "pyodide" / f"{name}.js", script_wrapping(name, (pyodide / name).read_bytes()))
    (static / STATIC).mkdir(parents=True, exist_ok=True)
    for asset in sorted(ASSETS.iterdir()):
        _copy_if_changed(asset, static / STATIC / asset.name)
    write_library_zip(static / STATIC / LIBRARY_ZIP)


def setup(app):
    app.connect("doctree-resolved", _insert_boxes)
    app.connect("html-page-context", _add_script_where_needed)
    app.connect("build-finished", _copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
