"""Mirror: IOPub messages of the agent's session become cells and outputs of a real YNotebook."""

from __future__ import annotations

import itertools

import pytest
from jupyter_ydoc import YNotebook
from pycrdt import Text

from pyrualean_lab.mirror import Mirror

AGENT = "agent-session"
_ids = itertools.count(1)


def msg(mtype: str, parent: str, content: dict, session: str = AGENT) -> dict:
    return {"channel": "iopub", "header": {"msg_type": mtype, "msg_id": f"m{next(_ids)}"},
            "parent_header": {"msg_id": parent, "session": session, "msg_type": "execute_request"},
            "content": content, "metadata": {}}


@pytest.fixture()
def doc() -> YNotebook:
    nb = YNotebook()
    nb.set({"cells": [{"id": "setup", "cell_type": "code", "source": "robo = make()", "execution_count": 1,
                       "metadata": {"pyrualean": {"author": "agent", "msg_id": "done-1"}}, "outputs": []}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    return nb


def test_agent_cell_streams_into_one_output(doc: YNotebook) -> None:
    m = Mirror(AGENT, Mirror.msg_ids_in(doc))
    assert m.handle(doc, msg("execute_input", "a1", {"code": "print(1)", "execution_count": 2})) == "a1"
    m.set_turn(doc, "a1", 3)
    m.handle(doc, msg("stream", "a1", {"name": "stdout", "text": "tick 1\n"}))
    m.handle(doc, msg("stream", "a1", {"name": "stdout", "text": "tick 2\n"}))
    m.handle(doc, msg("stream", "a1", {"name": "stderr", "text": "warn\n"}))
    cell = doc.ycells[1]
    assert cell["execution_state"] == "running"
    assert isinstance(cell["outputs"][0]["text"], Text)
    m.handle(doc, msg("execute_result", "a1", {"data": {"text/plain": "42"}, "metadata": {}, "execution_count": 2}))
    m.handle(doc, msg("status", "a1", {"execution_state": "idle"}))
    got = doc.get()["cells"][1]
    assert got["source"] == "print(1)" and got["execution_count"] == 2
    assert got["metadata"]["pyrualean"] == {"author": "agent", "msg_id": "a1", "turn": 3}
    assert [o["output_type"] for o in got["outputs"]] == ["stream", "stream", "execute_result"]
    assert got["outputs"][0]["text"] == "tick 1\ntick 2\n" and got["outputs"][1]["name"] == "stderr"
    assert doc.ycells[1]["execution_state"] == "idle"


def test_foreign_known_and_errors(doc: YNotebook) -> None:
    m = Mirror(AGENT, Mirror.msg_ids_in(doc))
    # A person's cell (another session) is JupyterLab's to write; a cell the trace holds is not repeated.
    assert m.handle(doc, msg("execute_input", "p1", {"code": "x = 1"}, session="lab")) is None
    assert m.handle(doc, msg("execute_input", "done-1", {"code": "robo = make()"})) is None
    assert doc.cell_number == 1
    m.handle(doc, msg("execute_input", "a2", {"code": "1/0", "execution_count": 3}))
    m.handle(doc, msg("error", "a2", {"ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": ["tb"]}))
    got = doc.get()["cells"][1]
    assert got["outputs"][0]["ename"] == "ZeroDivisionError"
    assert got["metadata"]["tags"] == ["raises-exception"]


def test_clear_and_update_display(doc: YNotebook) -> None:
    m = Mirror(AGENT)
    m.handle(doc, msg("execute_input", "a3", {"code": "h = display(...)"}))
    m.handle(doc, msg("display_data", "a3", {"data": {"text/plain": "v1"}, "metadata": {}, "transient": {"display_id": "d"}}))
    m.handle(doc, msg("stream", "a3", {"name": "stdout", "text": "x"}))
    m.handle(doc, msg("update_display_data", "a3", {"data": {"text/plain": "v2"}, "metadata": {"n": 2}, "transient": {"display_id": "d"}}))
    assert doc.get()["cells"][1]["outputs"][0]["data"] == {"text/plain": "v2"}
    m.handle(doc, msg("clear_output", "a3", {"wait": True}))
    assert len(doc.get()["cells"][1]["outputs"]) == 2  # cleared only when the next output comes
    m.handle(doc, msg("stream", "a3", {"name": "stdout", "text": "fresh"}))
    outs = doc.get()["cells"][1]["outputs"]
    assert len(outs) == 1 and outs[0]["text"] == "fresh"


def test_deleted_cell_is_let_go(doc: YNotebook) -> None:
    m = Mirror(AGENT)
    m.handle(doc, msg("execute_input", "a4", {"code": "print(1)"}))
    del doc.ycells[1]
    m.handle(doc, msg("stream", "a4", {"name": "stdout", "text": "late"}))
    assert doc.cell_number == 1 and "a4" not in m.cells
