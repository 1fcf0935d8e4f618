"""Render episode traces to HTML that carries no agent script (run by report.renderTraces).

A trace's outputs are the agent's: its ``_repr_html_``, ``display(Javascript(...))``, SVG or Markdown
can hold ``<script>``, ``<img onerror>`` or fetches. Each notebook is rendered from a sanitised copy:
outputs keep only inert MIME types (plain text and raster images, without metadata), Markdown is
sanitised by nbconvert (bleach), every ``<script>`` element the template adds is dropped, and the page
opens with a Content-Security-Policy that forbids scripts and network fetches.

Usage: python render_traces.py CSP TRACE.ipynb... ; writes trace.html beside each, atomically.
Prints one line per notebook that failed; exits 1 when any did.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

import nbformat
from nbconvert import HTMLExporter

INERT_MIME = ("text/plain", "image/png", "image/jpeg", "image/gif")
SCRIPT = re.compile(r"<script\b[^>]*>.*?</script\s*>", re.IGNORECASE | re.DOTALL)
HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)


def sanitise(nb: nbformat.NotebookNode) -> None:
    """Keep only inert outputs; note what was dropped in the output's own text."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if "data" not in out:
                continue
            dropped = sorted(k for k in out.data if k not in INERT_MIME)
            out.data = {k: v for k, v in out.data.items() if k in INERT_MIME}
            out.metadata = {}
            if dropped and "text/plain" not in out.data:
                out.data["text/plain"] = "[not rendered in the report: " + ", ".join(dropped) + "]"


def render(path: str, csp: str) -> None:
    """Write trace.html beside the notebook at path."""
    nb = nbformat.read(path, as_version=4)
    sanitise(nb)
    exporter = HTMLExporter(sanitize_html=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": os.path.basename(path)[:-6]}})
    body = SCRIPT.sub("", body)
    meta = '<meta http-equiv="Content-Security-Policy" content="' + csp + '">'
    body, n = HEAD.subn(lambda m: m.group(0) + "\n" + meta, body, count=1)
    if n != 1:
        raise ValueError("the rendered page has no <head>")
    out = path[:-6] + ".html"
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out), prefix=".trace.html.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str]) -> int:
    """Render every notebook named; report the ones that failed."""
    csp, paths = argv[0], argv[1:]
    failed = 0
    for p in paths:
        try:
            render(p, csp)
        except Exception as e:  # one bad trace does not stop the others
            failed += 1
            print(f"{p}: {type(e).__name__}: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
