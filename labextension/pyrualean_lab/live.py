"""Live documents and adopted kernels: what this Jupyter Server does for the gateway's episodes.

* :class:`Episodes` lists the gateway's episodes, adopts each episode's kernel into the server's kernel
  manager (so JupyterLab lists it in the Running panel and under "Connect to Existing Kernel" without
  ``pyrualean attach``) and forgets it once the episode and its gateway are gone (so a notebook on it is
  told the kernel is dead instead of waiting for ever).
* :class:`LiveDocument` keeps one notebook live: it follows the episode kernel's IOPub through the
  gateway and writes the agent's cells into the notebook's shared document with :class:`Mirror`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import time
import uuid
from typing import Any, Optional

import nbformat
from pycrdt import Text
from tornado.websocket import WebSocketClosedError

from . import presence
from .gateway import Gateway, GatewayGone
from .mirror import Mirror


class LiveDocument:
    """Mirrors one episode's agent cells into the notebook at ``path`` until the episode is gone."""

    def __init__(self, episodes: "Episodes", episode: dict, path: str, known: set[str], session_id: str) -> None:
        self.episodes = episodes
        self.episode_id: str = episode["id"]
        self.kernel_id: str = episode["kernel_id"]
        self.path = path
        self.mirror = Mirror(episode.get("agent_session", ""), known)
        self.session_id = session_id  # kept across reconnects: the gateway resends what was not read
        self.log = episodes.log
        self.task: Optional[asyncio.Task] = None
        self.first: Optional[asyncio.Future] = None
        self.user = presence.agent_user(episode)
        self.over = False  # the episode ended: the agent has left the document
        self._shown: Optional[tuple] = None  # (cell, phase, turn) last shown: set only on change
        self._shown_aw: Any = None  # the awareness it was shown in

    async def document(self):
        return await self.episodes.document(self.path)

    async def run(self, ws) -> None:
        """Applies messages from ``ws`` (already connected), reconnecting while the gateway lives."""
        misses = 0
        while True:
            try:
                while True:
                    raw = await ws.read_message()
                    if raw is None:
                        break
                    if isinstance(raw, bytes):
                        continue  # binary frames carry buffers (widgets), never cell outputs
                    await self.apply(json.loads(raw))
                    misses = 0
            except (WebSocketClosedError, ValueError) as e:
                self.log.debug("live %s: channel closed: %s", self.path, e)
            # The socket went away: come back as the same session (the gateway resends what we missed)
            # unless the episode is gone.
            if not await self.episodes.alive(self.episode_id):
                self.log.info("live %s: episode %s is gone; the document stays as it is", self.path, self.episode_id)
                await self.leave()
                return
            misses += 1
            await asyncio.sleep(min(0.2 * misses, 2.0))
            try:
                ws = await self.episodes.gateway.channels(self.kernel_id, self.session_id)
            except GatewayGone:
                continue

    async def apply(self, msg: dict[str, Any]) -> None:
        doc = await self.document()
        if doc is None:
            return
        started = self.mirror.handle(doc, msg)
        if started:
            asyncio.ensure_future(self._learn_turn(started))
        if (msg.get("header") or {}).get("msg_type") in ("execute_input", "status"):
            self.present(doc)  # only a cell's start or end moves the agent (not each line it prints)

    def present(self, doc) -> None:
        """Shows the agent in the document's awareness: its cursor on its latest cell, running or not;
        gone once the episode is over. Set only when something changed (each set is broadcast)."""
        aw = getattr(doc, "awareness", None)
        if aw is None:
            return
        cell_id, running = self.mirror.latest(doc)
        phase = "over" if self.over else ("running" if running else "idle")
        turn = self.mirror.turn_of(cell_id)
        key = (cell_id, phase, turn)
        if aw is self._shown_aw and key == self._shown:
            return
        self._shown, self._shown_aw = key, aw  # a room made again has a new awareness: shown again
        if self.over:
            aw.set_local_state(None)  # the agent left, as a person closing the notebook does
            return
        ycell = Mirror.find(doc, cell_id) if cell_id else None
        source = ycell.get("source") if ycell is not None else None
        aw.set_local_state(presence.document_state(self.user, source if isinstance(source, Text) else None, phase, turn))

    async def leave(self) -> None:
        """The episode is over: the agent leaves the document's awareness."""
        if self.over:
            return
        self.over = True
        doc = await self.episodes.document(self.path, create=False)
        if doc is not None:
            self.present(doc)

    async def _learn_turn(self, msg_id: str) -> None:
        """Names a just-started agent cell by its turn, from the episode's running cell."""
        for _ in range(3):
            ep = await self.episodes.episode(self.episode_id)
            rc = (ep or {}).get("running_cell") or {}
            if rc.get("msg_id") == msg_id and rc.get("turn"):
                doc = await self.document()
                if doc is not None:
                    self.mirror.set_turn(doc, msg_id, int(rc["turn"]))
                return
            await asyncio.sleep(0.1)


class Episodes:
    """The gateway's episodes as this server sees them (see the module note)."""

    POLL_S = 2.0

    def __init__(self, serverapp: Any, gateway: Optional[Gateway], log: logging.Logger) -> None:
        self.serverapp = serverapp
        self.gateway = gateway
        self.log = log
        self.live: dict[str, LiveDocument] = {}  # path -> live document
        self.adopted: set[str] = set()  # kernel ids this extension put in the kernel manager
        self.gone_since: Optional[float] = None
        self._task: Optional[asyncio.Task] = None

    # ----- listing -------------------------------------------------------------------------------------
    async def listing(self) -> dict:
        """{"gateway": "ok" | "gone" | "none", "episodes": [...], "live": {path: episode}, "error"?}."""
        if self.gateway is None:
            return {"gateway": "none", "episodes": [], "live": {}}
        live = {p: d.episode_id for p, d in self.live.items()}
        try:
            ans = await self.gateway.request("GET", "/api/episodes", timeout=5.0)
        except GatewayGone as e:
            if self.gone_since is None:
                self.gone_since = time.time()
            await self._forget_kernels(set())
            return {"gateway": "gone", "episodes": [], "live": live, "error": str(e)}
        self.gone_since = None
        eps = ans.body if ans.status == 200 and isinstance(ans.body, list) else []
        for ep in eps:
            if ep.get("kernel_id"):
                await self.adopt(ep["kernel_id"])
        await self._forget_kernels({ep.get("kernel_id") for ep in eps})
        if ans.status == 200 and isinstance(ans.body, list):  # a bad answer says nothing of who left
            await self._present(eps)
        return {"gateway": "ok", "episodes": eps, "live": live}

    async def _present(self, eps: list) -> None:
        """The agents in the global awareness (Lab's Collaborators panel), each with its live documents;
        an agent whose episode is over leaves its documents."""
        running = {ep.get("id"): ep for ep in eps if isinstance(ep, dict) and ep.get("state") != "over"}
        for d in list(self.live.values()):
            if d.episode_id not in running:
                await d.leave()
                continue
            doc = await self.document(d.path, create=False)
            if doc is not None:  # again each poll: a room made again (all its browsers had left) is new
                d.present(doc)
        room = self._global_room()
        if room is None:
            return
        here = [d for d in self.live.values() if not d.over]
        # The server is one client of the global room: it shows the latest live episode's agent with
        # every live document (two agents at once share one entry).
        state = presence.global_state(here[-1].user, [d.path for d in here]) if here else None
        if room.awareness.get_local_state() != state:
            room.awareness.set_local_state(state)

    async def episode(self, episode_id: str) -> Optional[dict]:
        try:
            ans = await self.gateway.request("GET", f"/api/episodes/{episode_id}", timeout=5.0)
        except GatewayGone:
            return None
        return ans.body if ans.status == 200 else None

    async def alive(self, episode_id: str) -> bool:
        return await self.episode(episode_id) is not None

    async def poll(self) -> None:
        """Adopts new episodes' kernels and forgets gone ones, without waiting for a browser to ask."""
        while True:
            try:
                await self.listing()
            except Exception as e:  # a poll must never stop polling
                self.log.warning("pyrualean episodes poll: %s", e)
            await asyncio.sleep(self.POLL_S)

    def start(self) -> None:
        """Starts polling once the server's event loop runs."""
        from tornado.ioloop import IOLoop

        def begin() -> None:
            if self.gateway is not None and self._task is None:
                self._task = asyncio.ensure_future(self.poll())

        IOLoop.current().add_callback(begin)

    # ----- kernels -------------------------------------------------------------------------------------
    def keep_live_kernels(self) -> None:
        """Never lets this server forget a live episode's kernel because one notebook left it, and lets it
        stop (SIGTERM) when a gateway is gone.

        Changing a notebook's kernel (or closing its session) makes Jupyter Server shut the old kernel
        down; the gateway answers a shutdown of an episode's kernel with success and keeps the kernel
        (closing Lab must not kill an agent's kernel), but the server then drops it from its kernel
        manager and every other notebook on it (the live document) loses its kernel. For adopted
        kernels the request still goes to the gateway (which records the refusal the bar shows), and
        the kernel stays listed here."""
        km = self.serverapp.kernel_manager
        if getattr(km, "_pyrualean_keeps", False):
            return
        orig = km.shutdown_kernel

        async def shutdown_kernel(kernel_id: str, now: bool = False, restart: bool = False) -> None:
            if kernel_id not in self.adopted:
                await _maybe_await(orig(kernel_id, now=now, restart=restart))
                return
            try:
                await _maybe_await(km.get_kernel(kernel_id).shutdown_kernel(now=now, restart=restart))
            except Exception as e:  # the gateway is gone or refused loudly: the kernel is forgotten by the poll
                self.log.info("pyrualean: shutdown of the episode kernel %s: %s", kernel_id, e)
            self.log.info("pyrualean: kept the episode kernel %s (a notebook left it; the episode goes on)", kernel_id)

        km.shutdown_kernel = shutdown_kernel
        km._pyrualean_keeps = True

        async def shutdown_all(now: bool = False) -> None:
            # Jupyter Server's own stops at the first kernel whose gateway is gone (an HTTP 503 escapes
            # its stop and the server never exits: SIGTERM hangs). Each kernel on its own here: an episode
            # kernel is left to its episode, one that cannot be reached is forgotten, the rest shut down.
            for kid in list(km.list_kernel_ids()):
                try:
                    if kid not in self.adopted:
                        await _maybe_await(km.get_kernel(kid).shutdown_kernel(now=now))
                except Exception as e:
                    self.log.info("pyrualean: kernel %s not shut down on exit (its gateway: %s)", kid, e)
                try:
                    km.remove_kernel(kid)
                except Exception as e:
                    self.log.debug("pyrualean: forgetting kernel %s: %s", kid, e)

        km.shutdown_all = shutdown_all

    async def adopt(self, kernel_id: str) -> None:
        """Puts a gateway kernel this server did not start into its kernel manager (Running panel, picker)."""
        km = self.serverapp.kernel_manager
        if kernel_id in km:
            return
        try:
            await km.start_kernel(kernel_id=kernel_id)  # gateway mode: "using existing kernel"
            self.adopted.add(kernel_id)
            self.log.info("pyrualean: listed the episode kernel %s", kernel_id)
        except Exception as e:
            self.log.warning("pyrualean: cannot adopt kernel %s: %s", kernel_id, e)

    async def _forget_kernels(self, listed: set) -> None:
        """Drops adopted kernels the gateway no longer has: their notebooks learn the kernel is dead."""
        km = self.serverapp.kernel_manager
        for kid in list(self.adopted):
            if kid in listed:
                continue
            self.adopted.discard(kid)
            remove = getattr(km, "remove_kernel", None)
            if callable(remove):
                remove(kid)
            sm = self.serverapp.session_manager
            try:  # the session row only: its kernel is already gone with the gateway
                sm.cursor.execute("DELETE FROM session WHERE kernel_id=?", (kid,))
            except Exception as e:
                self.log.debug("pyrualean: session of kernel %s: %s", kid, e)
            self.log.info("pyrualean: the episode kernel %s is gone", kid)

    def _ydoc(self) -> Any:
        """jupyter-collaboration's server extension (None when it is not enabled)."""
        exts = self.serverapp.extension_manager.extension_apps.get("jupyter_server_ydoc", set())
        return next(iter(exts)) if exts else None

    def _global_room(self):
        server = getattr(self._ydoc(), "ywebsocket_server", None)
        room = getattr(server, "rooms", {}).get(presence.GLOBAL_ROOM) if server is not None else None
        return room if room is not None and getattr(room, "awareness", None) is not None else None

    # ----- live documents ------------------------------------------------------------------------------
    async def document(self, path: str, create: bool = True):
        """The notebook's shared document (with create, made from the file when no one has it open)."""
        ydoc = self._ydoc()
        if ydoc is None:
            return None
        if not create:
            fim = self.serverapp.web_app.settings.get("file_id_manager")
            if fim is None or fim.get_id(path) is None:
                return None
        return await ydoc.get_document(path=path, content_type="notebook", file_format="json", copy=False, create=create)

    async def go_live(self, episode_id: str, path: Optional[str]) -> dict:
        """Makes ``path`` the episode's live notebook: seeds it with the trace (unless already live),
        binds a session to the episode's kernel and starts mirroring. Returns {path, kernel_id, session_id}."""
        if self.gateway is None:
            raise LookupError("this Jupyter Server does not run with --gateway-url: there are no episodes here")
        ep = await self.episode(episode_id)
        if ep is None:
            raise LookupError(f"no live episode {episode_id!r} on the gateway")
        kid = ep.get("kernel_id")
        if not kid:
            raise LookupError(f"episode {episode_id} lists no kernel")
        path = (path or f"pyrualean-episodes/{_safe(episode_id)}.ipynb").lstrip("/")
        if ydoc_missing(self.serverapp):
            raise LookupError("jupyter-collaboration is not enabled on this server: no live documents")
        live = self.live.get(path)
        if live is None or live.task is None or live.task.done():
            # Follow the kernel first, so nothing between the trace and the socket is lost.
            session_id = f"pyrualean-live-{uuid.uuid4()}"
            ws = await self.gateway.channels(kid, session_id)
            ans = await self.gateway.request("GET", f"/api/episodes/{episode_id}/trace", timeout=30.0)
            if ans.status != 200 or not isinstance(ans.body, dict):
                ws.close()
                raise LookupError(f"episode {episode_id}: no trace ({ans.status})")
            doc = await self.document(path, create=False)
            if doc is not None:
                # Someone has the notebook open: start it over from the trace in the shared document
                # (a file written under an open room would be loaded over it a moment later).
                doc.set(nbformat.from_dict(ans.body))
            else:
                nb = nbformat.from_dict(ans.body)
                cm = self.serverapp.contents_manager
                folder = posixpath.dirname(path)
                if folder and not await _maybe_await(cm.dir_exists(folder)):
                    await _maybe_await(cm.new(model={"type": "directory"}, path=folder))
                await _maybe_await(cm.save({"type": "notebook", "format": "json", "content": nb}, path))
                doc = await self.document(path)
            known = Mirror.msg_ids_in(doc) if doc is not None else set()
            live = LiveDocument(self, ep, path, known, session_id)
            rc = ep.get("running_cell") or {}
            if doc is not None and rc.get("msg_id") and rc["msg_id"] not in known:
                # The cell running now started before we listened: show it from here on.
                live.mirror.start_cell(doc, rc["msg_id"], rc.get("code", ""), None, rc.get("turn"))
            live.task = asyncio.ensure_future(live.run(ws))
            self.live[path] = live
            if doc is not None:
                live.present(doc)
        await self.adopt(kid)
        sid = await self._bind_session(path, kid)
        return {"path": path, "kernel_id": kid, "session_id": sid, "episode": episode_id}

    async def _bind_session(self, path: str, kernel_id: str) -> str:
        sm = self.serverapp.session_manager
        try:
            s = await sm.get_session(path=path)
            if s["kernel"]["id"] != kernel_id:
                await sm.update_session(s["id"], kernel_id=kernel_id)
            return s["id"]
        except Exception:
            s = await sm.create_session(path=path, name=posixpath.basename(path), type="notebook", kernel_id=kernel_id)
            return s["id"]


def ydoc_missing(serverapp: Any) -> bool:
    return not serverapp.extension_manager.extension_apps.get("jupyter_server_ydoc")


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)


async def _maybe_await(v: Any) -> Any:
    if asyncio.iscoroutine(v) or isinstance(v, asyncio.Future):
        return await v
    return v
