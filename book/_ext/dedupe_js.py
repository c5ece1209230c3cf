"""A tiny Sphinx extension: put each JavaScript file or inline script on a page only once.

Jupyter Book 1 reads the sources in two passes, and sphinx-thebe adds its inline configuration script on each pass,
so every page declared `const THEBE_JS_URL` twice and the browser logged a SyntaxError on every page.
"""


def _unique(scripts):
    seen, unique = set(), []
    for script in scripts:
        filename = getattr(script, "filename", script) or ""  # inline scripts come as None or ""
        attributes = getattr(script, "attributes", {})
        key = (str(filename), tuple(sorted((name, str(value)) for name, value in attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    return unique


def _dedupe_page(app, pagename, templatename, context, doctree):
    if "script_files" in context:
        context["script_files"] = _unique(context["script_files"])


def setup(app):
    app.connect("html-page-context", _dedupe_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
