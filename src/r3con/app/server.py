"""The app's HTTP side: the page, its JSON API and the run's event stream, behind `security.Guard`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ..config import Settings
from ..errors import InputError, R3conError
from . import history, runs
from .endpoint import Endpoint, plan, planned_endpoint
from .security import Guard, OutsideWorkspace, within
from .workspace import TooLarge, Workspace

STATIC = {"app.js": "text/javascript", "app.css": "text/css", "index.html": "text/html"}
FILE_CHARS = 1_000_000  # the most of one file the page shows (a preview, not the document's reading)


@dataclass
class AppState:
    """What the routes share: the workspace, the settings every run starts from, the server found, the runs."""

    workspace: Workspace
    settings: Settings
    endpoint: Endpoint
    demo: bool = False
    llm: Any = None  # a model object instead of the endpoint (tests)
    live: dict[str, runs.AppRun] = field(default_factory=dict)
    planned: Any = None  # the endpoint as a run opens it (model, window, slots), once probed

    async def planned_endpoint(self) -> Any:
        if self.planned is None:
            self.planned = await planned_endpoint(self.settings)
        return self.planned


def _static(name: str) -> str:
    return resources.files("r3con.app").joinpath("static", name).read_text(encoding="utf-8")


async def _body(request: Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError as exc:
        raise InputError("the request's body is not JSON") from exc
    if not isinstance(data, dict):
        raise InputError("the request's body is not a JSON object")
    return data


def _error(exc: Exception) -> Response:
    status = 413 if isinstance(exc, TooLarge) else 403 if isinstance(exc, OutsideWorkspace) else 400
    return JSONResponse({"error": str(exc)}, status_code=status)


def build(state: AppState, token: str, hosts: frozenset[str]) -> Guard:
    """The ASGI app: every route behind the token, Host and Origin checks."""
    return Guard(Starlette(routes=_workspace_routes(state) + _run_routes(state) + _history_routes(state)), token, hosts)


def _workspace_routes(state: AppState) -> list[Route]:
    """The page, its files, the server in use, and the workspace: its tree, folders added, files uploaded."""

    async def page(request: Request) -> Response:
        return HTMLResponse(_static("index.html"), headers={"Cache-Control": "no-store"})

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return PlainTextResponse("not found", status_code=404)
        return Response(_static(name), media_type=STATIC[name], headers={"Cache-Control": "no-store"})

    async def about(request: Request) -> Response:
        ws = state.workspace
        try:  # the model, window and slots as a run opens the endpoint (a server that does not answer: none)
            planned = await state.planned_endpoint()
        except R3conError as exc:
            planned, problem = None, str(exc)
        else:
            problem = ""
        return JSONResponse({"workspace": str(ws.root), "folders": [str(f) for f in ws.folders],
                             "endpoint": state.endpoint.to_dict(), "demo": state.demo,
                             "planned": planned.to_dict() if planned is not None else None, "problem": problem,
                             "limits": {"file_bytes": ws.limits.file_bytes, "files": ws.limits.files},
                             "defaults": {"reuse": state.settings.reuse, "max_cost_usd": state.settings.max_cost_usd}})

    async def tree(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(state.workspace.tree))

    async def add_folder(request: Request) -> Response:
        try:
            state.workspace.add_folder(str((await _body(request)).get("path", "")))
        except R3conError as exc:
            return _error(exc)
        return JSONResponse(await asyncio.to_thread(state.workspace.tree))

    async def upload(request: Request) -> Response:
        try:
            await state.workspace.save_upload(request.query_params.get("name", ""), request.stream())
        except R3conError as exc:
            return _error(exc)
        return JSONResponse({"ok": True})

    async def read_file(request: Request) -> Response:
        try:
            path = within(Path(request.query_params.get("path", "")), state.workspace.readable_roots())
        except R3conError as exc:
            return _error(exc)
        if not path.is_file():
            return JSONResponse({"error": "no such file in the workspace"}, status_code=404)
        with path.open(encoding="utf-8", errors="replace") as f:
            return JSONResponse({"path": str(path), "text": f.read(FILE_CHARS)})

    return [Route("/", page), Route("/static/{name}", static), Route("/api/about", about), Route("/api/tree", tree),
            Route("/api/folders", add_folder, methods=["POST"]), Route("/api/files", upload, methods=["PUT"]),
            Route("/api/file", read_file)]


def _run_routes(state: AppState) -> list[Route]:
    """The plan, and runs asked, followed, cancelled and resumed."""

    async def make_plan(request: Request) -> Response:
        try:
            body = await _body(request)
            question = str(body.get("question", ""))
            if not question.strip():
                raise InputError("the question is empty: type a question")
            corpus = await asyncio.to_thread(state.workspace.load)
            planned = await state.planned_endpoint()
            return JSONResponse(await plan(question, corpus.documents, _run_settings(state, body), planned))
        except R3conError as exc:
            return _error(exc)

    async def ask(request: Request) -> Response:
        try:
            body = await _body(request)
            sources = state.workspace.sources()
            if not sources:
                raise InputError("add a folder (its path) or drop files on the page first")
            if not state.endpoint.base_url and state.llm is None:
                raise InputError(state.endpoint.problem or "no model server: pass --base-url and --model")
            run = runs.start(str(body.get("question", "")), sources, _run_settings(state, body), llm=state.llm)
        except R3conError as exc:
            return _error(exc)
        state.live[run.id] = run
        return JSONResponse({"id": run.id})

    async def resume(request: Request) -> Response:
        try:
            folder = history.folder(state.workspace.runs, request.path_params["name"])
            body = await _body(request)
            settings = _run_settings(state, body)
            run = runs.resume(folder, settings, lambda p: within(p, state.workspace.readable_roots()),
                              llm=state.llm)
        except R3conError as exc:
            return _error(exc)
        state.live[run.id] = run
        return JSONResponse({"id": run.id})

    async def events(request: Request) -> Response:
        run = state.live.get(request.path_params["id"])
        if run is None:
            return JSONResponse({"error": "no such run"}, status_code=404)
        return StreamingResponse(_sse(run), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def cancel(request: Request) -> Response:
        run = state.live.get(request.path_params["id"])
        if run is None:
            return JSONResponse({"error": "no such run"}, status_code=404)
        run.cancel()
        return JSONResponse({"ok": True})

    return [Route("/api/plan", make_plan, methods=["POST"]), Route("/api/runs", ask, methods=["POST"]),
            Route("/api/runs/{name}/resume", resume, methods=["POST"]),
            Route("/api/live/{id}/events", events), Route("/api/live/{id}/cancel", cancel, methods=["POST"])]


def _history_routes(state: AppState) -> list[Route]:
    """The workspace's runs: listed, each one's details and view (the report's page), its report written."""
    async def listed(request: Request) -> Response:
        return JSONResponse({"runs": await asyncio.to_thread(history.listed, state.workspace.runs),
                             "live": [{"id": r.id, "question": r.question, "status": r.status,
                                       "run_dir": str(r.run_dir) if r.run_dir else None} for r in state.live.values()]})

    async def details(request: Request) -> Response:
        try:
            folder = history.folder(state.workspace.runs, request.path_params["name"])
        except R3conError as exc:
            return _error(exc)
        return JSONResponse(await asyncio.to_thread(history.details, folder))

    async def view(request: Request) -> Response:
        try:
            folder = history.folder(state.workspace.runs, request.path_params["name"])
        except R3conError as exc:
            return _error(exc)
        return HTMLResponse(await asyncio.to_thread(history.view, folder), headers={"Cache-Control": "no-store"})

    async def export(request: Request) -> Response:
        try:
            folder = history.folder(state.workspace.runs, request.path_params["name"])
        except R3conError as exc:
            return _error(exc)
        from ..report import write_report

        return JSONResponse({"path": str(await asyncio.to_thread(write_report, folder))})

    return [Route("/api/runs", listed), Route("/api/runs/{name}", details),
            Route("/api/runs/{name}/export", export, methods=["POST"]), Route("/runs/{name}/view", view)]


def _run_settings(state: AppState, body: dict[str, Any]) -> Settings:
    cap = body.get("max_cost_usd")
    try:
        cap_value = float(cap) if cap not in (None, "") else None
    except (TypeError, ValueError) as exc:
        raise InputError("the spending cap is a number of US dollars, e.g. 0.50") from exc
    if cap_value is not None and cap_value <= 0:
        raise InputError("the spending cap is a number of US dollars above 0")
    reuse = body.get("reuse")
    return runs.with_run_settings(state.settings, max_cost_usd=cap_value,
                                  reuse=str(reuse) if reuse else None)


async def _sse(run: runs.AppRun) -> AsyncIterator[bytes]:
    async for event in run.follow():
        yield f"data: {json.dumps(event, default=str)}\n\n".encode()
