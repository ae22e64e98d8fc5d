"""The mutation battery (tests/mutations.py): genuine passages of real documents altered as copying models
alter them. None of the meaning-changing alterations may come out verified; at least 98% of the
meaning-keeping ones must. On the committed excerpts always; on the whole corpora when ../shared/data is here
(docs/evidence.md has the table, from `python bench/evidence_battery.py`)."""

from collections import Counter
from pathlib import Path

from r3con.evidence.citations import VERIFIED

from .mutations import Case, corpora, fixture_corpora, run

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"


def _check(cases: list[Case], at_least: int) -> None:
    kinds = Counter(c.kind for c in cases)
    changed = [c for c in cases if c.group == "changes"]
    kept = [c for c in cases if c.group == "keeps"]
    assert len(changed) >= at_least and len(kept) >= at_least, kinds
    verified = [(c.kind, c.altered) for c in changed if c.outcome in VERIFIED]
    assert verified == [], "meaning-changing alterations verified"
    missed = [(c.kind, c.outcome, c.altered) for c in kept if c.outcome not in VERIFIED]
    assert len(missed) <= 0.02 * len(kept), missed
    # the mismatches name what differs, from the document and from the record
    assert all(c.differences for c in cases if c.outcome == "mismatch")


def test_the_battery_on_the_committed_excerpts():
    _check(list(run(fixture_corpora(FIXTURES), per_kind=40)), at_least=150)


def test_the_battery_on_dracula_and_the_loong_reports(shared_data):
    cases = list(run(corpora(shared_data), per_kind=40))
    assert {c.corpus for c in cases} == {"Dracula", "Loong English reports", "Loong Chinese reports"}
    _check(cases, at_least=1000)
