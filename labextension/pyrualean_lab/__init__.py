"""pyrualean's JupyterLab side: a prebuilt lab extension (the episode bar: state, turn, the held cell,
Pause / Step / Resume, notices) and this server extension, which the bar and ``pyrualean attach`` talk to:

* ``GET  /pyrualean/api/episodes``: the gateway's episodes (``gateway``: ok, gone or none);
* ``POST /pyrualean/api/episodes/{id}/{pause|resume|step|discard}``: the gateway's answer, refusals included;
* ``POST /pyrualean/api/episodes/{id}/live`` ``{"path"?}``: make a notebook the episode's live document
  (:mod:`pyrualean_lab.live`).

It works with the Jupyter Server's ``--gateway-url`` (the pyrualean gateway of ``play --serve``) and
jupyter-collaboration (live documents)."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .gateway import Gateway, GatewayGone
from .live import Episodes

__all__ = ["Episodes", "Gateway"]

ACTIONS = ("pause", "resume", "step", "discard")


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "pyrualean-lab"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "pyrualean_lab"}]


class _Base(APIHandler):
    @property
    def episodes(self) -> Episodes:
        return self.settings["pyrualean_episodes"]


class EpisodesHandler(_Base):
    @web.authenticated
    async def get(self) -> None:
        self.finish(json.dumps(await self.episodes.listing()))


class ActionHandler(_Base):
    @web.authenticated
    async def post(self, episode_id: str, action: str) -> None:
        eps = self.episodes
        if eps.gateway is None:
            raise web.HTTPError(404, "this Jupyter Server does not run with --gateway-url: there are no episodes here")
        if action not in ACTIONS:
            raise web.HTTPError(404, f"unknown episode action {action!r} ({', '.join(ACTIONS)})")
        try:
            ans = await eps.gateway.request("POST", f"/api/episodes/{episode_id}/{action}")
        except GatewayGone as e:
            raise web.HTTPError(502, f"the episode's gateway is gone: {e}") from e
        body: Any = ans.body
        if ans.status >= 400:
            msg = body.get("message") if isinstance(body, dict) else None
            self.set_status(ans.status)
            self.finish(json.dumps({"message": msg or f"the gateway answered {ans.status}", "reason": "refused"}))
            return
        self.finish(json.dumps(body))


class LiveHandler(_Base):
    @web.authenticated
    async def post(self, episode_id: str) -> None:
        try:
            req = json.loads(self.request.body or b"{}")
        except ValueError as e:
            raise web.HTTPError(400, f"body is not JSON: {e}") from e
        path = req.get("path") if isinstance(req, dict) else None
        if path is not None and not isinstance(path, str):
            raise web.HTTPError(400, "path must be a string")
        try:
            out = await self.episodes.go_live(episode_id, path)
        except LookupError as e:
            raise web.HTTPError(404, str(e)) from e
        except GatewayGone as e:
            raise web.HTTPError(502, f"the episode's gateway is gone: {e}") from e
        self.finish(json.dumps(out))


def _load_jupyter_server_extension(serverapp: Any) -> None:
    gateway = Gateway.from_server()
    episodes = Episodes(serverapp, gateway, serverapp.log)
    web_app = serverapp.web_app
    base = url_path_join(web_app.settings["base_url"], "pyrualean", "api", "episodes")
    web_app.settings["pyrualean_episodes"] = episodes
    web_app.add_handlers(".*$", [
        (base, EpisodesHandler),
        (url_path_join(base, r"([^/]+)", "live"), LiveHandler),
        (url_path_join(base, r"([^/]+)", r"([a-z]+)"), ActionHandler),
    ])
    if gateway is not None:
        episodes.keep_live_kernels()
    episodes.start()
    serverapp.log.info("pyrualean_lab: %s", f"episodes of {gateway.url}" if gateway else "no gateway (inert)")
