"""Progress as a layer around the LLM seam: one step per document, however many calls it took."""

import json

from r3con.corpus.documents import documents_from_texts
from r3con.errors import ProviderError
from r3con.llm.layers import Progressed
from r3con.stages.populate import PopulateOptions, populate
from r3con.stages.relevance import RelevanceOptions, extract_relevance

from ..fakes import SIMPLE_SCHEMA, ScriptedLLM, document_number, quote

DOCS = documents_from_texts([(f"Letter {i}", f"Ann Lee wrote letter {i}.") for i in range(1, 6)])


async def test_each_document_advances_its_stage_once_per_round_answered_or_failed():
    def note(request):
        return ProviderError("HTTP 500", status=500) if document_number(request) == 3 else "Ann wrote."

    done: list[str] = []
    result = await extract_relevance(Progressed(ScriptedLLM({"relevance": note}), done.append), "Who wrote?", DOCS,
                                     RelevanceOptions(rounds=2))
    assert len(result.failures) == 2, "document 3 failed in both rounds"
    assert done == ["relevance"] * 10, "five documents, two rounds: the failed one counts as done too"


async def test_reasked_documents_advance_once():
    replies: dict[int, int] = {}

    def records(request):
        n = document_number(request)
        replies[n] = replies.get(n, 0) + 1
        if replies[n] == 1 and n % 2:
            return "not json at all"  # odd documents are re-asked once
        return json.dumps({"people": [{"name": "Ann", "_passage": quote(request)}]})

    done: list[str] = []
    filled = await populate(Progressed(ScriptedLLM({"populate": records}), done.append), "Who?", SIMPLE_SCHEMA,
                            DOCS, "", PopulateOptions())
    assert filled.reasked == 3 and sum(replies.values()) == 8
    assert done == ["populate"] * 5
