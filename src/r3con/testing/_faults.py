"""Faults the scripted server can inject, deterministically per request body and attempt.

    429        HTTP 429 with Retry-After (seconds) and retry-after-ms
    500        HTTP 500
    hang       no answer for `hang_s` seconds, then the connection closes (past the client's timeout)
    drop       the connection closes without a response
    truncate   finish_reason "length" and the reply cut in half
    malformed  a JSON reply comes back broken (fenced in prose, a closing bracket lost, a trailing comma)
    empty      an empty reply
    reasoning  the reply only in `reasoning_content` (Qwen thinking mode on vLLM), `content` empty
    delay      not a fault: seconds every chat completion takes (to let tests act mid-run)
    json_schema=0  an endpoint without constrained decoding: HTTP 400 for response_format json_schema
    invent     not a fault of the reply's form: this share of records (population) get a passage that is
               not in their document (the document's words in a new order, or a sentence of another
               document's note); the call log lists them under "invented"
    reword     not a fault either: this share of the other records get a genuine passage copied carelessly
               (white space, quotes, dashes, case, or one word changed); logged under "reworded"
    misvalue   nor this: this share of records get one value that neither their passage nor their
               document states (a number changed, a name the document does not have); logged under
               "misvalued" as [table, position, field]

Embeddings requests get the transport faults (429, 500, hang, drop); the others are for chat replies.
A request (by the hash of its body) gets at most `max_faults_per_request` faults, so retries succeed.
Spec: comma-separated NAME=RATE, plus seed=N, max=N, retry_after=S, hang_s=S, delay=S, only=STAGE+STAGE; e.g.
'429=0.1,500=0.1,hang=0.05,drop=0.05,truncate=0.1,malformed=0.2,empty=0.05,reasoning=0.1,seed=7'.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, fields
from typing import Any

KINDS = ("429", "500", "hang", "drop", "truncate", "malformed", "empty", "reasoning")
TRANSPORT_FAULTS = frozenset({"429", "500", "hang", "drop"})  # no reply to read; embeddings requests get these too
_RATE_FIELD = {kind: f"rate_{kind}" for kind in KINDS}
_OPTIONS = {"seed": "seed", "max": "max_faults_per_request", "retry_after": "retry_after_s",
            "hang_s": "hang_s", "delay": "delay_s", "only": "only",
            "json_schema": "json_schema", "invent": "invent", "reword": "reword", "misvalue": "misvalue"}


@dataclass(frozen=True)
class FaultPlan:
    """Per-request fault rates (0 to 1, summed at most 1) and the knobs of each fault."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_hang: float = 0.0
    rate_drop: float = 0.0
    rate_truncate: float = 0.0
    rate_malformed: float = 0.0
    rate_empty: float = 0.0
    rate_reasoning: float = 0.0
    retry_after_s: float = 0.05
    hang_s: float = 5.0
    delay_s: float = 0.0
    seed: int = 0
    max_faults_per_request: int = 2
    json_schema: int = 1  # 0: the endpoint has no constrained decoding (400 on response_format json_schema)
    only: str = ""  # stages that get faults, '+'-separated (e.g. 'populate+schema'); empty: every stage
    invent: float = 0.0  # share of records whose passage is invented (not in the document)
    reword: float = 0.0  # share of the other records whose genuine passage is copied carelessly
    misvalue: float = 0.0  # share of records given a value that neither their passage nor their document states

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        """E.g. '429=0.2,500=0.1,empty=0.05,seed=7,max=2'."""
        names = {**_RATE_FIELD, **_OPTIONS}
        values: dict[str, Any] = {}
        for item in filter(None, (p.strip() for p in spec.split(","))):
            key, _, raw = item.partition("=")
            if key not in names:
                raise ValueError(f"unknown fault {key!r}; known: {', '.join(names)}")
            if key == "only":
                values["only"] = raw
                continue
            try:
                values[names[key]] = int(raw) if key in ("seed", "max", "json_schema") else float(raw)
            except ValueError:
                raise ValueError(f"fault {key}={raw!r} needs a number") from None
        plan = cls(**values)
        if sum(plan.rate(kind) for kind in KINDS) > 1.0 + 1e-9:
            raise ValueError("the fault rates add up to more than 1")
        return plan

    def rate(self, kind: str) -> float:
        return float(getattr(self, _RATE_FIELD[kind]))

    def spec(self) -> str:
        """The plan as a spec string `parse` reads back."""
        by_field = {v: k for k, v in {**_RATE_FIELD, **_OPTIONS}.items()}
        return ",".join(f"{by_field[f.name]}={getattr(self, f.name)}" for f in fields(self)
                        if getattr(self, f.name) != f.default)

    def decide(self, request_hash: str, attempt: int, stage: str = "") -> str | None:
        """The fault for the `attempt`-th time this request body arrives (None: answer normally)."""
        if attempt >= self.max_faults_per_request or (self.only and stage not in self.only.split("+")):
            return None
        roll = random.Random(f"{self.seed}:{request_hash}:{attempt}").random()
        for kind in KINDS:
            rate = self.rate(kind)
            if roll < rate:
                return kind
            roll -= rate
        return None


def break_json(content: str, request_hash: str) -> str | None:
    """A broken copy of a JSON reply that json-repair or extraction recovers; None if `content` is not JSON."""
    fenced = re.fullmatch(r"\s*```(?:json)?\s*\n(.*?)```\s*", content, flags=re.DOTALL)
    inner = fenced.group(1) if fenced else content
    try:
        value = json.loads(inner)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    compact = json.dumps(value, ensure_ascii=False)
    variant = int(request_hash[:8], 16) % 3
    if variant == 0:
        return f"Here is the JSON you asked for:\n```json\n{json.dumps(value, indent=2, ensure_ascii=False)}\n```\nDone."
    if variant == 1:
        return compact[:-1]  # the last closing brace lost
    return compact[:-1] + ",}" if compact.endswith("}") and len(compact) > 2 else compact  # a trailing comma


def message_for(fault: str | None, content: str, request_hash: str) -> tuple[dict[str, Any], str]:
    """The assistant message and finish_reason for a 200 reply under `fault`."""
    if fault == "truncate":
        return {"role": "assistant", "content": content[: len(content) // 2]}, "length"
    if fault == "empty":
        return {"role": "assistant", "content": ""}, "stop"
    if fault == "reasoning":
        return {"role": "assistant", "content": None, "reasoning_content": content}, "stop"
    if fault == "malformed":
        broken = break_json(content, request_hash)
        if broken is not None:
            return {"role": "assistant", "content": broken}, "stop"
    return {"role": "assistant", "content": content}, "stop"
