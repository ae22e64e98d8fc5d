"""The report page: a Jinja2 template with autoescaping, the data as escaped JSON, inline style and script
pinned by a Content-Security-Policy of their hashes, so nothing else in the page can run."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

import jinja2

from ..config import STAGES


def json_for_script(data: Any) -> str:
    """`data` as JSON that cannot close or open a tag inside <script>: `<`, `>` and `&` as \\u escapes."""
    return "".join(script_json(data))


def script_json(data: Any, piece: int = 1 << 20) -> Iterator[str]:
    """`json_for_script(data)` a piece at a time: a large run's page is written without a second copy of its
    JSON (escaped) or of the page (joined, then encoded)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    for start in range(0, len(text), piece):
        yield text[start:start + piece].replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


def _asset(name: str) -> str:
    return resources.files("r3con.report").joinpath("templates", name).read_text(encoding="utf-8")


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: _asset(name)),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )


def cost_text(usage: dict[str, Any]) -> str:
    """A usage's cost as the CLI says it: USD, "price unknown", or free on a local server."""
    from ..llm.types import Usage

    return Usage.from_dict(usage).cost_text().removeprefix("$")


def usage_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per stage (in pipeline order, others after): calls, tokens, cached, cost, time."""
    by_stage = data["usage"].get("by_stage") or {}
    names = [s for s in STAGES if s in by_stage] + [s for s in by_stage if s not in STAGES]
    rows = []
    for name in names:
        u = by_stage.get(name) or {}
        t = data["timing"].get(name) or {}
        rows.append({"stage": name, "calls": int(u.get("calls", 0)), "cache_hits": int(u.get("cache_hits", 0)),
                     "prompt": int(u.get("prompt_tokens", 0)), "cached": int(u.get("cached_tokens", 0)),
                     "completion": int(u.get("completion_tokens", 0)), "cost": cost_text(u),
                     "wall_s": t.get("wall_s"), "latency_s": t.get("latency_s")})
    return rows


def chart(rows: list[dict[str, Any]], width: int = 520, bar: int = 18) -> dict[str, Any]:
    """Bar geometry for the token chart: per stage, cached prompt, uncached prompt and completion tokens."""
    top = max((r["prompt"] + r["completion"] for r in rows), default=0) or 1
    label, usable = 90, width - 90 - 70
    bars = []
    for i, r in enumerate(rows):
        cached = usable * r["cached"] / top
        fresh = usable * max(0, r["prompt"] - r["cached"]) / top
        out = usable * r["completion"] / top
        bars.append({"stage": r["stage"], "y": i * (bar + 8), "x0": label, "cached": round(cached, 1),
                     "fresh": round(fresh, 1), "out": round(out, 1), "total": r["prompt"] + r["completion"],
                     "end": round(label + cached + fresh + out + 6, 1)})
    return {"width": width, "height": len(rows) * (bar + 8) + 24, "bar": bar, "bars": bars,
            "legend_y": len(rows) * (bar + 8) + 14}


def render(data: dict[str, Any]) -> str:
    """The whole page as one string."""
    return "".join(render_pieces(data))


def render_pieces(data: dict[str, Any]) -> Iterator[str]:
    """The page, a piece at a time (for writing it as it is made)."""
    script, style = _asset("report.js"), _asset("report.css")
    if "</script" in script.lower() or "</style" in style.lower():  # our own assets; a guard against editing mistakes
        raise ValueError("report assets must not close their own tags")
    csp = ("default-src 'none'; "
           f"script-src {csp_hash(script)}; style-src {csp_hash(style)}; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    rows = usage_rows(data)
    return _environment().get_template("report.html.j2").generate(
        data=data, payload=script_json(data), script=script, style=style, csp=csp,
        usage_rows=rows, chart=chart(rows), settings=sorted(data["settings"].items()), cost_text=cost_text,
    )
