"""Builds the round-trip corpus with Jupyter's own tools.

usage: python make_corpus.py OUT_DIR            executes notebooks with nbclient, writes them with nbformat
       python make_corpus.py --canon OUT_DIR F...  reads each F with nbformat and writes it back canonically

Every file written here is what nbformat.write produces, so the Go writer must reproduce it byte for byte.
"""

from __future__ import annotations

import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

KERNEL = "pyrualean"

STREAMS = [
    "print('hello')",
    "import sys\nprint('out 1'); print('err 1', file=sys.stderr); print('out 2')",
    "for i in range(3):\n    print(f'\\rprogress {i}', end='')\nprint()",
    "print('windows line\\r\\nand \\x0b vertical tab \\x0c form feed \\x1c sep \\x85 nel \\u2028 ls \\u2029 ps')",
    "print('controls \\x00\\x01\\x07\\x1b[31mred\\x1b[0m \\x7f del')",
    "print('<b>html & escapes</b> \"quoted\" \\\\ backslash /slash')",
    "print('unicode: héllo wörld, 中文, עברית, emoji 🤖🦾, combining é, astral 𝔘')",
    "print('no trailing newline', end='')",
    "print('')",
    "pass",
]

RESULTS = [
    "1 + 1",
    "3.14159 * 2",
    "{'b': 1, 'a': [1, 2.5, None, True], 'nested': {'x': 1e-7, 'y': 1e20}}",
    "'a string\\nwith lines'",
    "import numpy as np\nnp.arange(12).reshape(3, 4)",
    "x = 10\nx",
]

DISPLAYS = [
    "from IPython.display import HTML, display\ndisplay(HTML('<table><tr><td>1</td><td>&amp;</td></tr></table>\\n<p>two</p>'))",
    "from IPython.display import Markdown\nMarkdown('# Title\\n\\n* item one\\n* item two 🦾\\n')",
    "from IPython.display import JSON\nJSON({'key': [1, 2, {'deep': 0.1}], 'empty': {}, 'pi': 3.141592653589793})",
    "from IPython.display import Latex\nLatex(r'$\\alpha^2 + \\beta$')",
    "from IPython.display import SVG\nSVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\">\\n<rect width=\"10\" height=\"10\"/>\\n</svg>')",
    "from IPython.display import Javascript\nJavascript('console.log(1);\\nconsole.log(2);')",
    "from IPython.display import display\ndisplay({'text/plain': 'raw bundle', 'application/vnd.custom+json': {'a': 1}, 'text/x-custom': 'line1\\nline2'}, raw=True)",
    "from IPython.display import display\ndisplay({'text/plain': 'with meta'}, raw=True, metadata={'isolated': True, 'custom': {'n': 2}})",
    "from PIL import Image\nimport numpy as np\nimg = Image.fromarray((np.arange(48*64*3) % 251).astype('uint8').reshape(48, 64, 3))\ndisplay(img)",
    "%matplotlib inline\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(2, 2))\nax.plot([0, 1, 2], [0, 1, 4])\nplt.show()",
    "from IPython.display import Image as I\nimport io\nfrom PIL import Image\nb = io.BytesIO(); Image.new('RGB', (8, 4), (200, 10, 10)).save(b, 'PNG')\nI(data=b.getvalue(), width=80, height=40)",
    "from IPython.display import display, update_display\nh = display('first', display_id=True)\nh.update('second')",
    "from IPython.display import clear_output\nprint('gone')\nclear_output()\nprint('kept')",
]

ERRORS = [
    "1/0",
    "raise ValueError('bad <value> & \"quotes\" ✗')",
    "def f():\n    return g()\ndef g():\n    raise KeyError('k')\nf()",
    "import sys\nprint('before')\nraise RuntimeError('after output')",
]


def executed(name: str, sources: list[str], out_dir: str, allow_errors: bool = False) -> None:
    from nbclient import NotebookClient  # slow to import; --canon does not need it

    nb = new_notebook()
    nb.metadata["title"] = name
    for s in sources:
        nb.cells.append(new_code_cell(s))
    client = NotebookClient(
        nb, kernel_name=KERNEL, timeout=120, allow_errors=allow_errors, record_timing=True,
        resources={"metadata": {"path": out_dir}},
    )
    client.execute()
    nbformat.write(nb, os.path.join(out_dir, name + ".ipynb"))


def handwritten(out_dir: str) -> None:
    """Edge cases nbclient does not produce: attachments, raw cells, widgets metadata, odd text."""
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    nb = new_notebook()
    nb.metadata.update({
        "kernelspec": {"name": "pyrualean", "display_name": "Python (pyrualean robot)", "language": "python"},
        "language_info": {"name": "python", "version": "3.11.2", "mimetype": "text/x-python",
                          "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                          "nbconvert_exporter": "python", "pygments_lexer": "ipython3"},
        "widgets": {"application/vnd.jupyter.widget-state+json": {
            "state": {"abc123": {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
                                  "model_module_version": "2.0.0", "state": {"value": 7, "max": 100, "step": 0.5}}},
            "version_major": 2, "version_minor": 0}},
        "numbers": {"int": 12345678901234567890, "neg": -3, "float": 0.1, "tiny": 1e-300, "big": 1.5e300,
                    "exp": 2.5e-05, "whole": 3.0, "zero": 0.0, "negzero": -0.0},
        "unicode_ключ": "значение", "emoji 🤖": ["🦾", "\u2028", "\u0000\u001f"],
        "escapes": "</script><!-- & --> \\ \" \t",
    })
    nb.cells = [
        new_markdown_cell("![one](attachment:one.png)\n\nText with attachment.", attachments={
            "one.png": {"image/png": png},
            "two.svg": {"image/svg+xml": "<svg>\n<rect/>\n</svg>\n"},
            "notes.txt": {"text/plain": "line a\nline b"},
        }),
        new_markdown_cell("", metadata={"tags": ["empty"]}),
        new_markdown_cell("trailing newlines\n\n\n"),
        new_markdown_cell("crlf\r\nlines\r\nand lone\rcarriage"),
        new_raw_cell("raw text\n%% not python", metadata={"raw_mimetype": "text/x-python", "format": "text/x-python"}),
        new_raw_cell("", attachments={}),
        new_code_cell("", metadata={"collapsed": False, "scrolled": "auto",
                                    "jupyter": {"source_hidden": True, "outputs_hidden": False}}),
        new_code_cell("x = 1\n", execution_count=3, outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="a\rb\r\nc\n"),
            nbformat.v4.new_output("execute_result", data={"text/plain": "1", "application/json": {"z": [1, {"y": None}]},
                                                          "image/png": png}, execution_count=3,
                                   metadata={"image/png": {"width": 1, "height": 1}}),
            nbformat.v4.new_output("display_data", data={"text/html": "<p>already\nsplit</p>",
                                                        "application/vnd.jupyter.widget-view+json": {
                                                            "model_id": "abc123", "version_major": 2, "version_minor": 0}}),
            nbformat.v4.new_output("error", ename="Err", evalue="", traceback=[]),
        ]),
        new_code_cell("print(1)", metadata={"pyrualean": {"author": "human", "turn": 4},
                                            "execution": {"iopub.execute_input": "2026-01-02T03:04:05.123456Z"}},
                      execution_count=None),
    ]
    nbformat.write(nb, os.path.join(out_dir, "handwritten.ipynb"))

    # A 4.4 notebook without cell ids stays 4.4 (the reader must not invent ids).
    old = new_notebook()
    old.nbformat_minor = 4
    old.cells = [new_markdown_cell("old"), new_code_cell("1")]
    for c in old.cells:
        del c["id"]
    nbformat.write(old, os.path.join(out_dir, "v4_4_no_ids.ipynb"))


def canon(out_dir: str, paths: list[str]) -> None:
    for p in paths:
        nb = nbformat.read(p, as_version=nbformat.NO_CONVERT)
        nbformat.write(nb, os.path.join(out_dir, os.path.basename(p)))


def upgrade(out_dir: str, paths: list[str]) -> None:
    """Write each notebook as Jupyter opens it: read converting to v4 (nbformat 3 upgraded)."""
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        nbformat.write(nb, os.path.join(out_dir, os.path.basename(p)))


def main() -> None:
    if sys.argv[1] == "--canon":
        canon(sys.argv[2], sys.argv[3:])
        return
    if sys.argv[1] == "--upgrade":
        upgrade(sys.argv[2], sys.argv[3:])
        return
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    handwritten(out_dir)
    # One kernel for everything: kernels are the slow part.
    executed("executed", STREAMS + RESULTS + DISPLAYS + ERRORS, out_dir, allow_errors=True)


if __name__ == "__main__":
    main()
