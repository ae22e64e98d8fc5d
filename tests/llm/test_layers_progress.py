"""Progress as a layer around the LLM seam: one step per document, however many calls it took."""

import json

from r3con.corpus.documents import documents_from_texts
from r3con.errors import ProviderError
from r3con.llm.layers.accounting import Progressed
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


async def test_a_round_counts_each_part_once_and_keeps_no_earlier_round():
    from r3con.llm.types import ChatRequest, Message

    done: list[str] = []
    layer = Progressed(ScriptedLLM({"relevance": "a note"}), done.append)

    def ask(doc, part, round_no):
        return ChatRequest(messages=(Message("user", f"read {doc}.{part}"),), stage="relevance", doc=doc, part=part,
                           round=round_no)

    for round_no in (1, 2):
        for doc, part in [(10, None), (10, None), (11, 1), (11, 2), (11, 1)]:  # re-asks count once
            await layer.complete(ask(doc, part, round_no))
    assert done == ["relevance"] * 6  # three parts a round, each round on its own
    assert list(layer._done) == ["relevance"] and layer._done["relevance"][0] == 2  # round 1's set let go
