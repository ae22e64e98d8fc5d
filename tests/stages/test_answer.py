import json

from r3con.llm.replies import final_answer_line
from r3con.stages.answer import (
    AnswerOptions,
    answer_direct,
    answer_with_code,
    data_view,
    extract_code,
)

from ..fakes import ScriptedLLM

TABLES = {"people": [{"name": "Ann", "age": 4, "_doc": 1, "_title": "One"},
                     {"name": "Bob", "age": 7, "_doc": 2, "_title": "Two"}]}
OPTIONS = AnswerOptions(max_steps=3)


def code(text: str) -> str:
    return f"Let me look.\n```python\n{text}\n```"


async def test_agent_runs_code_over_the_bound_data_and_ends_with_final_answer(tmp_path):
    replies = iter([code("print(len(people), dfs['people'].age.sum(), notes['1'])"),
                    code("final_answer({'oldest': max(people, key=lambda p: p['age'])['name']})")])
    llm = ScriptedLLM({"reason": lambda r: next(replies)})
    result = await answer_with_code(llm, "Who is oldest?", {"1": "Ann is 4"}, "<notes/>", "{}", TABLES,
                                    AnswerOptions(max_steps=3, scratch_root=tmp_path))
    assert result.answer == '{"oldest": "Bob"}' and not result.capped
    assert "2 11 Ann is 4" in result.steps[0].observation
    assert llm.history[1].messages[-1].content == result.steps[0].observation
    assert all(r.mode == "code" for r in llm.history)


async def test_state_persists_and_errors_are_observations(tmp_path):
    replies = iter([code("x = 40"), code("1/0"), code("final_answer(x + 2)")])
    llm = ScriptedLLM({"reason": lambda r: next(replies)})
    result = await answer_with_code(llm, "t", {}, "", "{}", TABLES, AnswerOptions(max_steps=5, scratch_root=tmp_path))
    assert result.answer == "42"
    assert "ZeroDivisionError" in result.steps[1].observation


async def test_step_bound_ends_with_one_plain_answer_call(tmp_path):
    llm = ScriptedLLM({"reason": lambda r: "Answer: Bob" if r.mode == "final" else code("print('thinking')")})
    result = await answer_with_code(llm, "t", {}, "", "{}", TABLES, AnswerOptions(max_steps=2, scratch_root=tmp_path))
    assert result.capped and result.answer == "Bob"
    assert [r.mode for r in llm.history] == ["code", "code", "final"]


async def test_reply_without_code_is_told_so(tmp_path):
    replies = iter(["I think it is Bob.", code("final_answer('Bob')")])
    llm = ScriptedLLM({"reason": lambda r: next(replies)})
    result = await answer_with_code(llm, "t", {}, "", "{}", TABLES, AnswerOptions(max_steps=3, scratch_root=tmp_path))
    assert result.answer == "Bob"
    assert "No ```python block" in llm.history[1].messages[-1].content


async def test_direct_mode_answers_in_one_call_from_notes_and_data():
    llm = ScriptedLLM({"reason": lambda r: "Bob is 7, Ann is 4.\nAnswer: Bob"})
    result = await answer_direct(llm, "Who is oldest?", "<notes>n</notes>", "{}", TABLES, OPTIONS)
    assert result.answer == "Bob" and result.mode == "direct"
    (request,) = llm.history
    assert request.mode == "direct" and '"name": "Ann"' in request.messages[0].content


def test_data_view_samples_large_data_with_counts():
    rows = [{"name": f"n{i}", "v": i} for i in range(5000)]
    view = data_view({"t": rows}, 2000)
    assert '"records": 5000' in view and "too large" in view and len(view) < 4000
    assert data_view(TABLES, 10_000).startswith('{"people"')


def test_data_view_is_whole_exactly_up_to_its_limit():
    whole = json.dumps(TABLES, ensure_ascii=False)
    assert data_view(TABLES, len(whole)) == whole
    assert data_view(TABLES, len(whole) - 1).startswith("The data is too large")


def test_code_and_answer_extraction():
    assert extract_code("a\n```python\nx=1\n```\n```python\ny=2\n```") == "x=1"
    assert extract_code("```\nprint(1)\n```") == "print(1)"
    assert extract_code("no code") is None
    assert final_answer_line("reasoning\nAnswer: 12 people") == "12 people"


CITED = {"people": [{"name": "Ann", "_id": "R1.1.1", "_doc": 1, "_title": "One", "_passage": "Ann is 4.",
                     "_span": [0, 9], "_match": "exact"}]}


async def test_the_agent_cites_record_ids_it_sees_and_never_sees_spans(tmp_path):
    replies = iter([code("print(sorted(people[0]))"),
                    code("final_answer('Ann', cite=[r['_id'] for r in people])")])
    llm = ScriptedLLM({"reason": lambda r: next(replies)})
    result = await answer_with_code(llm, "Who?", {}, "", "{}", CITED, AnswerOptions(max_steps=3, scratch_root=tmp_path))
    assert result.answer == "Ann" and result.citations == ("R1.1.1",)
    assert "'_id'" in result.steps[0].observation and "'_passage'" in result.steps[0].observation
    assert "_span" not in result.steps[0].observation and "_span" not in llm.history[0].messages[1].content


async def test_at_the_step_bound_and_in_direct_mode_a_sources_line_is_taken_off_the_answer(tmp_path):
    llm = ScriptedLLM({"reason": lambda r: code("x = 1") if r.mode == "code" else "Answer: Ann\nSources: R1.1.1, Document 1"})
    capped = await answer_with_code(llm, "Who?", {}, "", "{}", CITED, AnswerOptions(max_steps=1, scratch_root=tmp_path))
    assert capped.capped and capped.answer == "Ann" and capped.citations == ("R1.1.1", "Document 1")
    direct = await answer_direct(llm, "Who?", "", "{}", CITED, OPTIONS)
    assert direct.answer == "Ann" and direct.citations == ("R1.1.1", "Document 1")
    assert "Sources:" in llm.history[-1].messages[0].content and "_span" not in llm.history[-1].messages[0].content


async def test_type_names_no_python_name_can_carry_are_made_safe_and_the_mapping_is_shown(tmp_path):
    tables = {"../../evil": TABLES["people"], "class": TABLES["people"][:1], "2025 data": TABLES["people"]}
    replies = iter([code("final_answer([len(evil), len(class_), len(dfs['t_2025_data']), len(records['../../evil'])])")])
    llm = ScriptedLLM({"reason": lambda r: next(replies)})
    result = await answer_with_code(llm, "t", {}, "", "{}", tables, AnswerOptions(max_steps=2, scratch_root=tmp_path))
    assert result.answer == "[2, 1, 2, 2]", result.steps
    shown = llm.history[0].messages[-1].content
    assert "record type '../../evil' is evil (records['evil'], dfs['evil'])" in shown
    assert "record type 'class' is class_" in shown and "record type '2025 data' is t_2025_data" in shown
