"""What a call may spend of the window, decided once from the settings and the window: one frozen plan that
the stages, `estimate` and the re-plan after a learned window all read; and the stages' options made from it. The
window is asked of its one owner (`r3con.llm.window.Window.planning`, through `EndpointView.planning_window`), never
kept here."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ..config import DEFAULT_CONCURRENCY, Settings
from ..notes.selection import Embed
from ..sandbox import SandboxLimits
from ..stages.answer import AnswerOptions
from ..stages.plan import Placement
from ..stages.populate import PopulateOptions, RecordLimits
from ..stages.relevance import RelevanceOptions

PROMPT_OVERHEAD = 1500  # tokens for instructions, task and tags around a document


@dataclass(frozen=True)
class Budgets:
    """The token budgets of one window (in r3con's estimated tokens).

    - `reply_reserve`: kept for a per-document call's reply: the larger of the relevance and population
      reply budgets, at most a quarter of the window (at least 256).
    - `instructions`: kept for a per-document call's instructions, task and tags: 1,500, or an eighth of
      a smaller window.
    - `part_tokens`: what a document part may take: half of what the window leaves after the reply
      reserve and the instructions (the other half is for the notes), at least 256; `--part-tokens` if set.
      At 2,048 / 4,096 / 8,192 / 32,768 tokens with the default reply budgets (notes 1,024, records
      4,096): 640 / 1,280 / 2,560 / 13,586 tokens.
    - `notes_budget`: what the other documents' notes may take in one call; None: every note in full
      (`--notes-budget 0`, the paper's behaviour even if the window overflows). Unset, what the window
      leaves after the largest part, the reply reserve, the instructions and a margin (1,000 tokens, or
      a sixteenth of a smaller window), at least 256.
    - `note_tokens`, `records_tokens`, `answer_tokens`: the reply budgets of relevance, population and
      the answer (the first two within the reply reserve).
    - `data_view_chars`: characters of the records the answer's prompt may show: at most about a
      quarter of the window (at some four characters a token), so that records, notes and reply fit.
    """

    window: int
    reply_reserve: int
    instructions: int
    part_tokens: int
    notes_budget: int | None
    note_tokens: int
    records_tokens: int
    answer_tokens: int
    data_view_chars: int

    @classmethod
    def of(cls, settings: Settings, window: int) -> Budgets:
        reserve = min(max(settings.note_max_tokens, settings.populate_max_tokens), max(256, window // 4))
        instructions = min(PROMPT_OVERHEAD, window // 8)
        part = settings.part_tokens or max(256, (window - reserve - instructions) // 2)
        if settings.notes_budget_tokens == 0:
            notes: int | None = None
        elif settings.notes_budget_tokens:
            notes = settings.notes_budget_tokens
        else:
            notes = max(256, window - part - reserve - instructions - min(1000, window // 16))
        return cls(window=window, reply_reserve=reserve, instructions=instructions, part_tokens=part,
                   notes_budget=notes, note_tokens=min(settings.note_max_tokens, reserve),
                   records_tokens=min(settings.populate_max_tokens, reserve), answer_tokens=settings.reason_max_tokens,
                   data_view_chars=min(settings.data_view_chars, window))

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)


def part_budget(settings: Settings, window: int) -> int:
    """Tokens a document part may take in `window` (`Budgets.part_tokens`)."""
    return Budgets.of(settings, window).part_tokens


def in_flight(settings: Settings) -> int | None:
    """Per-document calls a stage prepares at once: a few times what the endpoint takes, so prompts are
    built as slots free up and memory follows the calls in flight, not the corpus; a batch takes all."""
    return None if settings.batch else 4 * (settings.concurrency or DEFAULT_CONCURRENCY)  # unset: as for the default


@dataclass(frozen=True)
class StageOptions:
    """What each stage is given from the settings: one mapping, for the run and for `estimate`."""

    relevance: RelevanceOptions
    populate: PopulateOptions
    answer: AnswerOptions


def stage_options(settings: Settings, budgets: Budgets | int, *, breakpoints: bool = False,
                  embed: Embed | None = None, scratch_root: Path | None = None) -> StageOptions:
    """The stages' options for `settings` within `budgets` (or the budgets of a window of that many tokens)."""
    if isinstance(budgets, int):
        budgets = Budgets.of(settings, budgets)
    placement = Placement.of(settings)
    return StageOptions(
        relevance=RelevanceOptions(
            rounds=settings.rounds, max_tokens=budgets.note_tokens, temperature=settings.temperature,
            breakpoints=breakpoints, placement=placement, embed=embed, in_flight=in_flight(settings),
            notes_budget=budgets.notes_budget,
        ),
        populate=PopulateOptions(
            max_tokens=budgets.records_tokens, attempts=settings.populate_attempts,
            temperature=settings.temperature, breakpoints=breakpoints, placement=placement,
            unverified=settings.unverified, in_flight=in_flight(settings), limits=RecordLimits.of(settings),
        ),
        answer=AnswerOptions(
            mode=settings.reasoning, max_steps=settings.max_steps, max_tokens=budgets.answer_tokens,
            temperature=settings.temperature, data_view_chars=budgets.data_view_chars,
            sandbox_limits=SandboxLimits(timeout_s=settings.sandbox_timeout_s, memory_mb=settings.sandbox_memory_mb),
            sandbox_mode=settings.sandbox_mode, scratch_root=scratch_root,
        ),
    )
