"""The agent as a collaborator: its presence in jupyter-collaboration's awareness, as a second person's.

In a live document's room the agent is the server's own awareness client (the client whose edits write
its cells): a named user with its own colour, and a cursor at the end of the cell it is running, which
JupyterLab draws as it draws a person's (``remoteUserCursors`` reads ``cursors[].head``, a Yjs relative
position). In the global awareness room (JupyterLab's "Online Collaborators" panel) it is listed with
the live documents it works in.

Only the shapes JupyterLab reads are produced here; :mod:`pyrualean_lab.live` says when.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from pycrdt import Assoc, Text

GLOBAL_ROOM = "JupyterLab:globalAwareness"  # jupyter-collaboration's room for who works where

# Colours a person's Lab gives users are random; an agent's is stable per episode, picked from
# hues that read on both light and dark themes.
_COLOURS = ("#c2185b", "#7b1fa2", "#1565c0", "#00838f", "#2e7d32", "#ef6c00", "#6d4c41", "#ad1457")


def agent_user(episode: dict) -> dict[str, Any]:
    """The agent as JupyterLab's awareness names a user (``user`` field of a state)."""
    eid = str(episode.get("id") or "")
    model = str(episode.get("model") or "").strip()
    colour = _COLOURS[int(hashlib.sha256(eid.encode()).hexdigest(), 16) % len(_COLOURS)]
    name = f"Agent · {model}" if model else "Agent"
    return {
        "username": f"pyrualean-agent-{eid}",
        "name": name,
        "display_name": f"{name} (episode {eid})",
        "initials": "AI",
        "color": colour,
        "avatar_url": None,
    }


def relative_end(source: Text) -> Optional[dict[str, Any]]:
    """A Yjs relative position (JSON form) where the agent's cursor sits in ``source``: just after its
    last character, or None for an empty text (pycrdt has no position in one; it panics).

    pycrdt counts a text in UTF-8 bytes and Yjs in UTF-16 units: past a non-ASCII character the two
    disagree, so such a cell gets its cursor at its start, the one position both read alike."""
    text = str(source)
    if not text:
        return None
    if text.isascii():
        j = source.sticky_index(len(source), Assoc.BEFORE).to_json()
    else:
        j = source.sticky_index(0, Assoc.AFTER).to_json()
    # Yjs reads all four keys (a missing "item" is taken as an item, not as none).
    return {"type": j.get("type"), "tname": j.get("tname"), "item": j.get("item"), "assoc": j.get("assoc", 0)}


def document_state(user: dict, source: Optional[Text], phase: str, turn: Optional[int]) -> dict[str, Any]:
    """The agent's state in a live document's room: who it is, where its cursor is, what it does."""
    state: dict[str, Any] = {"user": user, "pyrualean": {"phase": phase, "turn": turn}}
    pos = relative_end(source) if source is not None else None
    if pos is not None:
        state["cursors"] = [{"anchor": pos, "head": pos, "primary": True, "empty": True}]
    return state


def global_state(user: dict, paths: list[str]) -> dict[str, Any]:
    """The agent's state in the global room: the Collaborators panel lists it with its documents."""
    return {"user": user, "current": f"notebook:{paths[-1]}" if paths else None, "documents": list(paths)}
