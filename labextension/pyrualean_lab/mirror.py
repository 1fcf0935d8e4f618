"""The agent as a collaborator in a notebook: its cells and their outputs, as the kernel sends them on
IOPub, written into the notebook's shared document (jupyter-collaboration's YNotebook), so every open
view of the notebook shows them as they run and a reload loses nothing (the document lives in the
server's room, not in the browser).

:class:`Mirror` is the translation, one IOPub message at a time, and knows nothing of servers or
sockets; :mod:`pyrualean_lab.live` feeds it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from jupyter_ydoc import YNotebook
from pycrdt import Array, Map, Text

TAG_RAISES = "raises-exception"


@dataclass
class _Cell:
    """An agent cell being mirrored: its document cell id and where its displays are."""

    cell_id: str
    clear_on_next: bool = False  # clear_output(wait=True): clear when the next output comes
    displays: dict[str, list[int]] = field(default_factory=dict)  # display_id -> output indexes


class Mirror:
    """Writes the agent's cells (execute requests from ``agent_session``) into a YNotebook.

    ``known`` are msg_ids whose cells the document already holds complete (from the episode's trace):
    their messages are ignored. A person's own cells are not mirrored: JupyterLab writes them itself.
    """

    def __init__(self, agent_session: str, known: Optional[set[str]] = None) -> None:
        self.agent_session = agent_session
        self.known: set[str] = set(known or ())
        self.cells: dict[str, _Cell] = {}  # parent msg_id -> cell being mirrored
        self.display_owner: dict[str, str] = {}  # display_id -> msg_id of the cell that showed it
        self.last: Optional[str] = None  # the document cell id of the agent's latest cell
        self.turns: dict[str, int] = {}  # document cell id -> the agent's turn

    @staticmethod
    def msg_ids_in(doc: YNotebook) -> set[str]:
        """The agent cells' msg_ids the document holds (metadata.pyrualean.msg_id)."""
        out = set()
        for i in range(len(doc.ycells)):
            meta = doc.ycells[i].get("metadata")
            pm = meta.get("pyrualean") if meta is not None else None
            if isinstance(pm, dict) and pm.get("msg_id"):
                out.add(pm["msg_id"])
            elif isinstance(pm, Map) and pm.get("msg_id"):
                out.add(pm.get("msg_id"))
        return out

    def is_agents(self, msg: dict) -> bool:
        parent = msg.get("parent_header") or {}
        return parent.get("session") == self.agent_session and bool(parent.get("msg_id"))

    def start_cell(self, doc: YNotebook, msg_id: str, code: str, count: Optional[int], turn: Optional[int]) -> str:
        """Appends the agent's cell (running) and returns its cell id."""
        cid = uuid.uuid4().hex[:16]
        meta: dict[str, Any] = {"author": "agent", "msg_id": msg_id}
        if turn:
            meta["turn"] = turn
        doc.append_cell({"id": cid, "cell_type": "code", "source": code, "execution_count": count,
                         "metadata": {"pyrualean": meta}, "outputs": []})
        ycell = self.find(doc, cid)
        if ycell is not None:
            ycell["execution_state"] = "running"
        self.cells[msg_id] = _Cell(cid)
        self.last = cid
        if turn:
            self.turns[cid] = turn
        return cid

    def latest(self, doc: YNotebook) -> tuple[Optional[str], bool]:
        """The agent's latest cell (its document cell id, or None) and whether it is running: the last
        one mirrored, else the document's last agent cell (from the trace)."""
        if self.last is None:
            for i in range(len(doc.ycells) - 1, -1, -1):
                meta = doc.ycells[i].get("metadata")
                pm = meta.get("pyrualean") if meta is not None else None
                author = pm.get("author") if isinstance(pm, (dict, Map)) else None
                if author == "agent":
                    return doc.ycells[i].get("id"), False
            return None, False
        return self.last, any(c.cell_id == self.last for c in self.cells.values())

    def turn_of(self, cell_id: Optional[str]) -> Optional[int]:
        return self.turns.get(cell_id or "")

    def set_turn(self, doc: YNotebook, msg_id: str, turn: int) -> None:
        """Records the agent's turn on its cell (learnt from the episode after the cell started)."""
        c = self.cells.get(msg_id)
        ycell = self.find(doc, c.cell_id) if c else None
        if ycell is None:
            return
        self.turns[c.cell_id] = turn
        meta = ycell["metadata"]
        pm = dict(meta.get("pyrualean") or {})
        pm["turn"] = turn
        meta["pyrualean"] = pm

    def handle(self, doc: YNotebook, msg: dict) -> Optional[str]:
        """Applies one IOPub message; returns the msg_id of an agent cell that just started (execute_input)
        so the caller can look its turn up, else None."""
        if msg.get("channel", "iopub") != "iopub" or not self.is_agents(msg):
            return None
        parent_id = msg["parent_header"]["msg_id"]
        if parent_id in self.known:
            return None
        mtype = (msg.get("header") or {}).get("msg_type", "")
        content = msg.get("content") or {}
        if mtype == "execute_input":
            if parent_id not in self.cells:
                self.start_cell(doc, parent_id, content.get("code", ""), content.get("execution_count"), None)
                return parent_id
            return None
        c = self.cells.get(parent_id)
        if c is None:
            return None
        ycell = self.find(doc, c.cell_id)
        if ycell is None:  # a person deleted the cell: stop mirroring it
            del self.cells[parent_id]
            return None
        if mtype == "status":
            if content.get("execution_state") == "idle":
                ycell["execution_state"] = "idle"
                del self.cells[parent_id]
            return None
        if mtype == "clear_output":
            if content.get("wait"):
                c.clear_on_next = True
            else:
                self._clear(ycell, c)
            return None
        if mtype == "update_display_data":
            self._update_display(doc, content)
            return None
        out = _output(mtype, content)
        if out is None:
            return None
        if c.clear_on_next:
            self._clear(ycell, c)
        youts = ycell["outputs"]
        if out["output_type"] == "stream" and len(youts) > 0:
            last = youts[len(youts) - 1]
            if last.get("output_type") == "stream" and last.get("name") == out["name"]:
                text = last.get("text")
                if isinstance(text, Text):
                    text += out["text"]
                else:
                    last["text"] = Text((text or "") + out["text"])
                return None
        if out["output_type"] == "stream":
            youts.append(Map({"output_type": "stream", "name": out["name"], "text": Text(out["text"])}))
        else:
            youts.append(Map(out))
        if out["output_type"] == "execute_result" and out.get("execution_count") is not None:
            ycell["execution_count"] = out["execution_count"]
        if out["output_type"] == "error":
            self._tag(ycell, TAG_RAISES)
        did = ((content.get("transient") or {}).get("display_id"))
        if did:
            c.displays.setdefault(did, []).append(len(youts) - 1)
            self.display_owner[did] = parent_id
        return None

    def _update_display(self, doc: YNotebook, content: dict) -> None:
        did = (content.get("transient") or {}).get("display_id")
        owner = self.display_owner.get(did or "")
        c = self.cells.get(owner or "")
        ycell = self.find(doc, c.cell_id) if c else None
        if ycell is None:
            return
        youts = ycell["outputs"]
        for i in c.displays.get(did, []):
            if i < len(youts):
                youts[i]["data"] = content.get("data") or {}
                youts[i]["metadata"] = content.get("metadata") or {}

    @staticmethod
    def _clear(ycell: Map, c: _Cell) -> None:
        youts = ycell["outputs"]
        if isinstance(youts, Array):
            youts.clear()
        c.displays.clear()
        c.clear_on_next = False

    @staticmethod
    def _tag(ycell: Map, tag: str) -> None:
        meta = ycell["metadata"]
        tags = list(meta.get("tags") or [])
        if tag not in tags:
            meta["tags"] = tags + [tag]

    @staticmethod
    def find(doc: YNotebook, cell_id: str) -> Optional[Map]:
        cells = doc.ycells
        for i in range(len(cells) - 1, -1, -1):  # agent cells are near the end
            if cells[i].get("id") == cell_id:
                return cells[i]
        return None


def _output(mtype: str, content: dict) -> Optional[dict]:
    """The nbformat output of an output-bearing IOPub message (None for other messages)."""
    if mtype == "stream":
        return {"output_type": "stream", "name": content.get("name", "stdout"), "text": content.get("text", "")}
    if mtype == "display_data":
        return {"output_type": "display_data", "data": content.get("data") or {},
                "metadata": content.get("metadata") or {}}
    if mtype == "execute_result":
        return {"output_type": "execute_result", "data": content.get("data") or {},
                "metadata": content.get("metadata") or {}, "execution_count": content.get("execution_count")}
    if mtype == "error":
        return {"output_type": "error", "ename": content.get("ename", ""), "evalue": content.get("evalue", ""),
                "traceback": content.get("traceback") or []}
    return None
