"""The agent's presence: the awareness states JupyterLab reads to draw a collaborator."""

from __future__ import annotations

from jupyter_ydoc import YNotebook
from pycrdt import Awareness, Doc, StickyIndex

from pyrualean_lab import presence
from pyrualean_lab.mirror import Mirror


def test_agent_user_is_named_and_stable() -> None:
    a = presence.agent_user({"id": "run-1", "model": "qwen"})
    assert a == presence.agent_user({"id": "run-1", "model": "qwen"})
    assert a["username"] == "pyrualean-agent-run-1" and a["display_name"] == "Agent · qwen (episode run-1)"
    assert a["color"].startswith("#") and presence.agent_user({"id": "x"})["name"] == "Agent"


def test_cursor_sits_at_the_end_of_the_agents_cell() -> None:
    ydoc = Doc()
    doc = YNotebook(ydoc, Awareness(ydoc))
    doc.set({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    m = Mirror("agent")
    assert m.latest(doc) == (None, False)
    cid = m.start_cell(doc, "a1", "print('hi')", 1, 2)
    assert m.latest(doc) == (cid, True) and m.turn_of(cid) == 2
    source = Mirror.find(doc, cid)["source"]
    state = presence.document_state(presence.agent_user({"id": "e"}), source, "running", 2)
    head = state["cursors"][0]["head"]
    # Every key Yjs reads is there; the item is the cell's last character, the position just after it.
    assert set(head) == {"type", "tname", "item", "assoc"} and head["assoc"] == -1
    back = StickyIndex.from_json({"item": head["item"], "assoc": head["assoc"]}, source)
    assert back.get_index() == len("print('hi')")
    doc.awareness.set_local_state(state)
    assert doc.awareness.get_local_state()["user"]["username"] == "pyrualean-agent-e"
    # Past a non-ASCII character pycrdt (UTF-8) and Yjs (UTF-16) count apart: the cursor goes to the start.
    uni = m.start_cell(doc, "a3", 'print("héllo 🤖 →")', 3, 4)
    usrc = Mirror.find(doc, uni)["source"]
    upos = presence.relative_end(usrc)
    assert upos["assoc"] == 0 and StickyIndex.from_json({"item": upos["item"], "assoc": upos["assoc"]}, usrc).get_index() == 0
    # An empty cell has no position: no cursor, the agent is still there.
    empty = m.start_cell(doc, "a2", "", 2, 3)
    assert presence.relative_end(Mirror.find(doc, empty)["source"]) is None
    assert "cursors" not in presence.document_state(presence.agent_user({"id": "e"}), Mirror.find(doc, empty)["source"], "running", 3)


def test_latest_falls_back_to_the_traces_last_agent_cell() -> None:
    doc = YNotebook()
    doc.set({"cells": [
        {"id": "a", "cell_type": "code", "source": "x", "metadata": {"pyrualean": {"author": "agent"}}, "outputs": [], "execution_count": 1},
        {"id": "h", "cell_type": "code", "source": "y", "metadata": {"pyrualean": {"author": "human"}}, "outputs": [], "execution_count": 2},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    assert Mirror("agent").latest(doc) == ("a", False)


def test_global_state_lists_the_documents() -> None:
    u = presence.agent_user({"id": "e"})
    assert presence.global_state(u, ["p/a.ipynb", "p/b.ipynb"]) == {
        "user": u, "current": "notebook:p/b.ipynb", "documents": ["p/a.ipynb", "p/b.ipynb"]}


def test_hostile_cells_never_break_the_presence() -> None:
    """What an agent's cell may hold (astral characters, lone surrogates escaped by the kernel, a huge
    cell) gives a position or none, never an exception in the server."""
    ydoc = Doc()
    doc = YNotebook(ydoc, Awareness(ydoc))
    doc.set({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    m = Mirror("agent")
    user = presence.agent_user({"id": "e\u202e<script>", "model": "m" * 5000})
    for i, code in enumerate(["\U0001F916" * 20000, "a" * 1_000_000, "\u0000\u202e\ufeff", "é\n" * 1000]):
        cid = m.start_cell(doc, f"h{i}", code, i, i)
        state = presence.document_state(user, Mirror.find(doc, cid)["source"], "running", i)
        doc.awareness.set_local_state(state)
        head = state["cursors"][0]["head"]
        assert head["item"] is not None and head["assoc"] in (-1, 0)
