"""A Sphinx extension: an answer box under every checked exercise, judged in the page by the book's own checker.

For every exercise directive whose label belongs to an exercise of the registry (`scaling_lib.book.exercises`;
label = check id with "-ex-" for the first dot, `index.label_for`), the HTML gets, at the end of the exercise:

    <div class="answer-box" data-exercise-id="ch4.kv-per-token-llama3-70b">
      an <input> per numeric part (radio buttons for a choice), a <button>, and <div class="verdict">
    </div>

Nothing about the answer is written into the page: the box only knows the exercise id and the parts' names and units.
When a reader first presses the button (or Enter), answer_boxes.js loads Pyodide (CPython compiled to WebAssembly)
from the book's own `_static/pyodide/`, unpacks `_static/answer_boxes/scaling_lib.zip` into it and calls
`checker.grade`, so the verdict is exactly what `check` prints in a notebook. Pages without a box load nothing.

At the end of the build this extension copies Pyodide's core files from `node_modules/pyodide` (the npm package pinned
in package.json; `npm ci` is run when it is missing) and builds the zip from the installed package: the modules that
`scaling_lib.estimate`, `scaling_lib.your_model` and `scaling_lib.book.exercises` import, found by importing them
in a fresh interpreter where
numpy, jax and matplotlib cannot be imported (so a module that needs them fails the build instead of the page), plus
`scaling_lib/data`. Nothing is a copy kept by hand.
"""

import html
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


def write_library_zip(target: Path) -> None:
    """A deterministic zip (fixed timestamps, sorted) of `library_files()`, rewritten only when its bytes change."""
    temporary = target.with_suffix(".tmp")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in library_files():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    if target.exists() and target.read_bytes() == temporary.read_bytes():
        temporary.unlink()
    else:
        temporary.replace(target)


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


def box_html(exercise) -> str:
    """The box of one exercise: its id, one input per part (the options of a choice), a button, a verdict line."""
    from scaling_lib.book.exercises import Choice

    esc = html.escape
    parts = []
    for part in exercise.parts:
        name = esc(part.name)
        if isinstance(part, Choice):
            options = "".join(f'<label><input type="radio" name="{esc(exercise.id)}:{name}" value="{key}"> '
                              f"({key}) {esc(text)}</label>" for key, text in part.options.items())
            legend = f"<legend>{name}</legend>" if part.name else ""
            parts.append(f'<fieldset class="answer-part answer-choice" data-part="{name}">{legend}{options}</fieldset>')
        else:
            label = f"{name} ({esc(part.unit)})" if part.name else f"Your answer ({esc(part.unit)})"
            parts.append(f'<label class="answer-part" data-part="{name}">{label} <input type="text" '
                         f'data-part="{name}" autocomplete="off" spellcheck="false" inputmode="decimal" '
                         f'placeholder="a number in {esc(part.unit)}, or with a unit"></label>')
    return (f'<div class="answer-box" data-exercise-id="{esc(exercise.id)}">'
            f'{"".join(parts)}<button type="button" class="answer-check">Check</button>'
            '<div class="verdict" aria-live="polite"></div></div>')


ESTIMATE_PAGE = "book/your_model"  # the appendix *Apply the book to your model* gets the estimate form


def estimate_form_html() -> str:
    """The estimate form: the fields of `scaling_lib.your_model.estimate_deployment` (those of `python -m scaling_lib
    estimate`), the lists of models, chips and formats taken from the library, and an output block for its table."""
    from scaling_lib.dtypes import BYTES_PER_ELEMENT
    from scaling_lib.hardware import chip_names
    from scaling_lib.models import model_names

    def select(name, options, selected, blank=None):
        items = ([f'<option value="">{html.escape(blank)}</option>'] if blank else []) + [
            f'<option value="{html.escape(o)}"{" selected" if o == selected else ""}>{html.escape(o)}</option>'
            for o in options]
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
    from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node

    registry = _registry()
    for node in list(doctree.findall(lambda n: isinstance(n, (exercise_node, exercise_enumerable_node)))):
        exercise = registry.get(node.get("label", ""))
        if exercise is not None:
            node += nodes.raw("", box_html(exercise), format="html")


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
    (static / STATIC).mkdir(parents=True, exist_ok=True)
    for asset in sorted(ASSETS.iterdir()):
        _copy_if_changed(asset, static / STATIC / asset.name)
    write_library_zip(static / STATIC / LIBRARY_ZIP)


def setup(app):
    app.connect("doctree-resolved", _insert_boxes)
    app.connect("html-page-context", _add_script_where_needed)
    app.connect("build-finished", _copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
