"""Every setting that shapes requests changes them and their fingerprints: over real HTTP to the scripted server.

For each setting whose role (`config.ROLES`) is "request" or "question", a small corpus is run with the
settings of the base case and again with that one setting changed. What the server received (each chat
request's body, canonically) must differ, the fingerprints calls.jsonl logs (`request_hash`, what the LLM
cache, the reuse record and resume key on) must differ, no two bodies may share a fingerprint, and the
reuse record's question key must differ. A setting whose role is "run" or "operational" is declared as
not shaping requests: it is not part of the question key (tests/test_config.py).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from r3con import Settings, documents_from_texts, run
from r3con.pipeline.reuse import question_key
from r3con.testing import Behaviour, FakeLLMServer, FaultPlan
from r3con.testing._server import _Handler

TASK = "How old are the people named, and where do they live?"
PEOPLE = [("Registry", "Ann Lee is 34 years old and lives in Oslo."),
          ("Letter", "Bob Stone, aged 41, wrote to Ann Lee from Bergen."),
          ("Census", "Cara Holm, 29, moved to Bergen.")]
MORE = [*PEOPLE, ("Ledger", "Dan Berg, 52, keeps a shop in Oslo."), ("Diary", "Eva Dahl, 38, lives in Tromso."),
        ("Notice", "Finn Moe, aged 61, sold his house in Bergen."), ("Roll", "Gro Lie is 23 and lives in Oslo."),
        ("Minutes", "Hans Aas, 45, chaired the meeting in Oslo.")]
RANKED = [*MORE, ("Gazette", "People live in Oslo, Oslo, Oslo, Oslo, Oslo, Oslo, Oslo and Oslo.")]  # BM25 and
# embeddings (the scripted server's: a hashed bag of words) rank this note apart: BM25 saturates a word's count
SPREAD = [(title, " ".join(f"{text} Entry {i} of the {title.lower()} repeats it for the archive." for i in range(25)))
          for title, text in MORE]  # documents longer than the notes: they lead their calls, and fill a small cache
LONG = [*PEOPLE, ("Chronicle", "\n\n".join(f"Paragraph {i}: Ann Lee, 34, and Bob Stone, 41, met in Oslo."
                                           for i in range(60)))]
MODELS = ("other-model", "small-model")

@dataclass(frozen=True)
class Case:
    """One setting changed to `value` over the base settings `base`, the corpus `docs`, a server made with `server`."""

    name: str
    value: Any
    base: dict[str, Any] = field(default_factory=dict)
    docs: tuple[tuple[str, str], ...] = tuple(PEOPLE)
    server: dict[str, Any] = field(default_factory=dict)


SELECTING = {"rounds": 2, "notes_budget_tokens": 45}  # later rounds see a selection of the notes, not all
CASES = [
    Case("model", MODELS[0]),
    Case("stage_models", {"populate": MODELS[1]}),
    Case("context_window", 4096),  # lowers max_tokens to fit the window
    Case("temperature", 0.3),
    Case("reasoning", "code"),
    Case("note_max_tokens", 512),
    Case("populate_max_tokens", 1024),
    Case("reason_max_tokens", 1024),
    Case("max_tokens_cap", 512),
    Case("data_view_chars", 40),
    Case("part_tokens", 256, docs=tuple(LONG)),
    Case("layout", "paper", docs=tuple(SPREAD)),  # documents that lead their calls under the cache layout
    Case("adaptive_placement", False, base={"rounds": 2}, docs=tuple(SPREAD), server={"behaviour": Behaviour(cache_blocks=60)}),
    Case("cache_breakpoints", "on"),
    Case("notes_budget_tokens", 10, base={"rounds": 2}),
    Case("notes_ranking", "bm25", base={**SELECTING, "embedding_model": "embed-small"}, docs=tuple(RANKED)),
    Case("embedding_model", "embed-small", base=SELECTING, docs=tuple(RANKED)),
    Case("batch", True, base={"rounds": 2, "batch_poll_s": 0.05}, docs=tuple(SPREAD), server={"behaviour": Behaviour(cache_blocks=60)}),
    Case("rounds", 2),
    Case("structuring", False),
    Case("max_steps", 1, base={"reasoning": "code"}),
    # a cut reply is kept, not asked again: the stage finds no valid JSON in it and re-asks, with the error
    Case("schema_attempts", 1, server={"faults": FaultPlan(rate_truncate=1.0, only="schema", max_faults_per_request=1)}),
    Case("populate_attempts", 1,
         server={"faults": FaultPlan(rate_truncate=1.0, only="populate", max_faults_per_request=1)}),
    Case("unverified", "keep", server={"faults": FaultPlan(invent=1.0)}),
    # a reply over a record limit degrades its document: the answer's request no longer holds its records and
    # names it as missing (three of SPREAD's documents yield five records each; Ann's passage passes 40 characters)
    Case("max_records", 1, base={"max_failed_share": 1.0}, docs=tuple(SPREAD)),
    Case("max_record_fields", 1, base={"max_failed_share": 1.0}),
    Case("max_value_chars", 40, base={"max_failed_share": 1.0}),
]


class _Recording(_Handler):
    """The scripted server's handler, keeping each chat request's body as sent (canonical JSON), and serving
    the models the cases name."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            return super().do_GET()
        self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "r3con-testing",
                                                      "max_model_len": self.state.max_model_len}
                                                     for name in (self.state.model, *MODELS)]})

    def _chat(self, body: dict[str, Any], request_hash: str) -> None:
        self.owner.bodies.append(json.dumps(body, sort_keys=True))
        super()._chat(body, request_hash)


class RecordingServer(FakeLLMServer):
    _handler = _Recording

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bodies: list[str] = []


def settings_for(server: RecordingServer, out: Path, case: Case, changed: bool) -> Settings:
    values = {"rounds": 1, "reasoning": "direct", **case.base}  # small and fast where the setting allows
    if changed:
        values[case.name] = case.value
    return Settings.resolve(env={}, base_url=server.base_url, api_key="scripted", out_dir=out, cache=False,
                            batch_poll_s=values.pop("batch_poll_s", 30.0), **values)


def sent_and_fingerprinted(server: RecordingServer, settings: Settings, docs: tuple[tuple[str, str], ...]
                           ) -> tuple[set[str], set[str]]:
    """The chat request bodies the server received during one run, and the fingerprints its calls.jsonl logged."""
    before = len(server.bodies)
    result = asyncio.run(run(TASK, documents_from_texts(list(docs)), settings))
    logged = [json.loads(line) for line in (Path(result.run_dir) / "calls.jsonl").read_text().splitlines()]
    return set(server.bodies[before:]), {r["request_hash"] for r in logged if r.get("request_hash")}


def test_every_setting_that_shapes_requests_has_a_case():
    shaping = {name for name, role in Settings.roles().items() if role in ("request", "question")}
    assert {case.name for case in CASES} == shaping


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_a_setting_that_shapes_requests_changes_what_is_sent_and_its_fingerprints(case, tmp_path):
    with RecordingServer(**case.server) as server:
        base = settings_for(server, tmp_path / "base", case, changed=False)
        changed = settings_for(server, tmp_path / "changed", case, changed=True)
        sent, fingerprints = sent_and_fingerprinted(server, base, case.docs)
        sent_changed, fingerprints_changed = sent_and_fingerprinted(server, changed, case.docs)
    assert question_key(TASK, base) != question_key(TASK, changed)
    assert sent and sent_changed != sent, f"{case.name}={case.value!r} did not change what the server received"
    assert fingerprints_changed != fingerprints, f"{case.name}={case.value!r} changed requests, not fingerprints"
    assert len(fingerprints | fingerprints_changed) >= len(sent | sent_changed), "two requests share a fingerprint"


QUIET = [("alternate_order", False), ("concurrency", 1), ("max_failed_share", 0.9), ("log_calls", "full"),
         ("retries", 0), ("request_timeout_s", 120.0), ("outage_s", 10.0), ("max_call_s", 100.0),
         ("routing_headers", ()), ("reuse", "off"), ("new_schema", True)]


def test_the_quiet_cases_are_settings_declared_as_not_shaping_requests():
    roles = Settings.roles()
    assert all(roles[name] in ("run", "operational") for name, _ in QUIET)


@pytest.mark.parametrize("name, value", QUIET, ids=[name for name, _ in QUIET])
def test_a_setting_declared_as_not_shaping_requests_leaves_them_and_their_fingerprints_as_they_were(
        name, value, tmp_path):
    case = Case(name, value, base={"rounds": 2}, docs=tuple(SPREAD), server={"behaviour": Behaviour(cache_blocks=60)})
    with RecordingServer(**case.server) as server:
        base = settings_for(server, tmp_path / "base", case, changed=False)
        changed = settings_for(server, tmp_path / "changed", case, changed=True)
        sent, fingerprints = sent_and_fingerprinted(server, base, case.docs)
        sent_changed, fingerprints_changed = sent_and_fingerprinted(server, changed, case.docs)
    assert question_key(TASK, base) == question_key(TASK, changed)
    assert (sent_changed, fingerprints_changed) == (sent, fingerprints)
