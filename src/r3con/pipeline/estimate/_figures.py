"""What an estimate assumes and what it predicts: the assumptions, the figures per stage, their range."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...llm.types import Usage
from ._draws import Interval, Spread


@dataclass(frozen=True)
class Assumptions:
    """What the estimate cannot know before the model answers; each can be set from the CLI, or
    measured on a few real calls (`sample`)."""

    note_tokens: int = 150  # a relevance note of a relevant document, in the first round
    relevant_share: float = 1.0  # the share of documents the model finds relevant (the others get no note)
    final_note_tokens: int | None = None  # the same in the last round (None: as in the first)
    final_relevant_share: float | None = None
    note_tags_tokens: int = 20  # a note's tags, document number and title around it in a prompt
    note_reply_tokens: int | None = None  # a relevance call's reply, NONE included (None: note_tokens)
    schema_tokens: int = 600  # the schema as JSON, in the populate and agent prompts, and the schema reply
    records_tokens: int = 300  # one document's records (a populate reply)
    populate_calls: float = 1.0  # calls per document in population (re-asks included)
    token_scale: float = 1.0  # the endpoint's prompt tokens per token counted here
    agent_steps: int = 4  # steps of the coding agent until final_answer
    step_tokens: int = 400  # one agent reply, and one REPL observation
    sampled: int = 0  # documents the figures above were measured on (0: assumed)
    probes: int = 0  # first-round relevance calls the share and first notes were measured on
    sample_usage: Usage | None = None  # what measuring them took
    spread: Spread | None = None  # what the sample saw document by document (for the range)
    schema_failed: bool = False  # the sample's schema proposal failed: the run goes on without records, as it would
    relevance_calls: float = 1.0  # calls per relevance request, re-asks of empty or invalid replies included
    relevance_requests: int = 0  # the relevance requests `relevance_calls` was measured on (0: assumed)
    agent_sampled: bool = False  # the agent's steps and replies were measured on the sample's records
    none_reply_tokens: int | None = None  # a relevance reply that gives no note (None: every reply as a note)
    note_reply_extra: int = 0  # what a reply with a note has beyond the note (tags, reasoning left in)
    unnoted_records_tokens: int | None = None  # the records of a document with no final note (None: records_tokens)
    records_density: tuple[float, float] | None = None  # records per token of a part, with and without a note
    note_order: tuple[int, ...] = ()  # the parts (positions in the corpus) likeliest to get a note first (sampled)

    def reply_tokens(self, noted: bool, note: int) -> int:
        """A relevance call's reply: its note and what comes with it, or a reply with no note."""
        if self.none_reply_tokens is None:
            return note if self.note_reply_tokens is None else self.note_reply_tokens
        return note + self.note_reply_extra if noted else self.none_reply_tokens

    def records_of(self, noted: bool, tokens: int) -> int:
        """A part's records (a population reply), by whether it has a final note and its tokens: a longer part
        holds more (`records_density`, measured), else the assumed size."""
        if self.records_density is not None:
            return round(self.records_density[0 if noted else 1] * tokens)
        return self.records_tokens if noted or self.unnoted_records_tokens is None else self.unnoted_records_tokens

    @property
    def final_share(self) -> float:
        return self.relevant_share if self.final_relevant_share is None else self.final_relevant_share

    def lines(self) -> list[str]:
        source = (f"measured on {self.sampled} sampled documents' relevance and population calls" if self.sampled
                  else "assumed")
        share_source = (f"{source}, the share and first notes on {self.probes} first-round calls along a BM25 "
                        "ranking" if self.probes > self.sampled else source)
        if self.final_note_tokens is None:
            notes = (f"notes ({share_source}): {self.relevant_share:.0%} of documents get a note of "
                     f"{self.note_tokens} tokens in each relevance round")
        else:
            notes = (f"notes ({share_source}): {self.relevant_share:.0%} of documents get a note of {self.note_tokens} "
                     f"tokens in the first relevance round, {self.final_share:.0%} one of {self.final_note_tokens} "
                     "tokens in the last")
        lines = [notes,
                 f"schema and records ({source}): the schema is {self.schema_tokens} tokens; a document's records "
                 f"are {self.records_tokens} tokens"
                 + ("" if self.unnoted_records_tokens is None else
                    f" with a note, {self.unnoted_records_tokens} without")
                 + ("" if self.records_density is None else
                    f" (on average: {self.records_density[0]:.3f} and {self.records_density[1]:.3f} a token of the part)")
                 + f"; {self.populate_calls:.2f} population calls a document",
                 f"the coding agent takes {self.agent_steps} steps of {self.step_tokens} tokens of reply and "
                 f"{self.step_tokens} of REPL output each ("
                 + ("measured on the sample's records)" if self.agent_sampled else "assumed)")]
        if self.relevance_calls != 1.0:
            lines.append(f"relevance calls ({source}): {self.relevance_calls:.2f} a request, re-asks of empty or "
                         "invalid replies included")
        if self.schema_failed:
            lines.append("the sample's schema proposal failed, so the run is planned as a run goes on then: every "
                         "schema attempt, no population, the answer directly from the notes in one call")
        if self.token_scale != 1.0:
            lines.append(f"the endpoint counts {self.token_scale:.2f} tokens for each token counted here")
        if self.sample_usage is not None:
            lines.append(f"sampling made {self.sample_usage.calls} calls ({self.sample_usage.prompt_tokens:,} prompt "
                         f"tokens, ${self.sample_usage.cost_usd:.4f})")
        return lines


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "calls": self.calls, "input_tokens": self.input_tokens,
                "cached_tokens": self.cached_tokens, "output_tokens": self.output_tokens,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6)}


@dataclass(frozen=True)
class EstimateRange:
    """Low, expected and high calls, prompt and completion tokens and USD, at `confidence`: drawn from what a
    sample saw (`basis` "sample"), or each assumption at the bounds of its stated prior ("priors")."""

    confidence: float
    calls: Interval
    prompt_tokens: Interval
    cost_usd: Interval | None
    draws: int  # sets of assumptions the range was read from
    narrower: str  # what would narrow it
    completion_tokens: Interval | None = None
    basis: str = "sample"

    def lines(self) -> list[str]:
        share = f"{self.confidence:.0%} range" if self.basis == "sample" else "range from the priors"
        cost = ("" if self.cost_usd is None else
                f"; USD {self.cost_usd.low:.4f} to {self.cost_usd.high:.4f} (expected {self.cost_usd.expected:.4f})")
        done = ("" if self.completion_tokens is None else
                f"; completion tokens {self.completion_tokens.low:,.0f} to {self.completion_tokens.high:,.0f} "
                f"(expected {self.completion_tokens.expected:,.0f})")
        return [f"{share}: calls {self.calls.low:,.0f} to {self.calls.high:,.0f} (expected "
                f"{self.calls.expected:,.0f}); prompt tokens {self.prompt_tokens.low:,.0f} to "
                f"{self.prompt_tokens.high:,.0f} (expected {self.prompt_tokens.expected:,.0f}){done}{cost}",
                self.narrower]

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "basis": self.basis, "calls": self.calls.to_dict(),
                "prompt_tokens": self.prompt_tokens.to_dict(),
                "completion_tokens": None if self.completion_tokens is None else self.completion_tokens.to_dict(),
                "cost_usd": None if self.cost_usd is None else self.cost_usd.to_dict(6),
                "draws": self.draws, "narrower": self.narrower}


@dataclass(frozen=True)
class Estimate:
    """Predicted calls, tokens and USD per stage, with the assumptions they rest on and how sure they are."""

    model: str
    documents: int
    parts: int
    stages: tuple[StageEstimate, ...]
    assumptions: tuple[str, ...] = field(default=())
    range: EstimateRange | None = None

    @property
    def total(self) -> StageEstimate:
        costs = [s.cost_usd for s in self.stages]
        return StageEstimate(
            "total", sum(s.calls for s in self.stages), sum(s.input_tokens for s in self.stages),
            sum(s.cached_tokens for s in self.stages), sum(s.output_tokens for s in self.stages),
            None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "documents": self.documents, "parts": self.parts,
                "stages": [s.to_dict() for s in self.stages], "total": self.total.to_dict(),
                "range": None if self.range is None else self.range.to_dict(),
                "assumptions": list(self.assumptions)}


@dataclass
class Tally:
    """One stage's calls and tokens as they are added up."""

    name: str
    calls: int = 0
    input: int = 0
    cached: int = 0
    output: int = 0

    def call(self, prompt: int, cached: int, output: int, times: int = 1) -> None:
        self.calls += times
        self.input += prompt * times
        self.cached += min(cached, prompt) * times
        self.output += output * times
