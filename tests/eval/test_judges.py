import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest

from r3con.errors import ConfigError, EndpointUnreachable, OutputError, ProviderError
from r3con.eval.judges import (
    EMPTY,
    JUDGE_ERROR,
    JUDGE_FAILED,
    JUDGED,
    OFFICIAL,
    PAPER_JUDGE,
    JudgeChoice,
    JudgePrompt,
    OfficialPrompt,
    builtin_prompt,
    choose_judge,
    judge_answer,
    judge_spec,
    prompt_from_file,
)
from r3con.eval.loong import judge_question
from r3con.eval.tasks import EvalTask
from r3con.llm.types import Usage

from ._fakes import JUDGE_USAGE, judge_llm, make_task

OFFICIAL_DIR = Path(str(resources.files("r3con.eval").joinpath("prompts", "official")))
LOONG = make_task("t1", "What is the EPS of Acme?", "-$0.04")


async def test_a_valid_reply_gives_the_rating_and_100_is_correct():
    llm = judge_llm('{"rationale": "matches", "score": 100}')
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "EPS was -$0.04.", llm)
    assert verdict.status == JUDGED and verdict.correct and verdict.rating == 100
    assert verdict.usage == JUDGE_USAGE and verdict.judge_model == "judge-model"
    (request,) = llm.history
    assert request.stage == "judge" and request.temperature == 0
    assert request.response_schema is not None and request.response_schema["properties"]["score"]["maximum"] == 100
    prompt = request.messages[0].content
    assert "<task>\nWhat is the EPS of Acme?\n</task>" in prompt
    assert "<answer>\nEPS was -$0.04.\n</answer>" in prompt and "<gold>\n-$0.04\n</gold>" in prompt
    assert request.prompt_name == "loong_judge" and request.prompt_hash == builtin_prompt("loong_judge").hash


async def test_a_rating_below_100_is_not_correct_but_is_kept():
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "about -0.04", judge_llm('{"rationale": "", "score": 85}'))
    assert verdict.status == JUDGED and not verdict.correct and verdict.rating == 85


async def test_fenced_and_prose_json_is_accepted():
    reply = 'Here is my verdict:\n```json\n{"rationale": "same value", "equivalent": true}\n```\nDone.'
    task = make_task("c1", "How many?", "215", benchmark="corpusqa")
    verdict = await judge_answer(judge_spec("corpusqa", protocol="r3con"), task, "Sum... The answer is: 215", judge_llm(reply))
    assert verdict.status == JUDGED and verdict.correct and verdict.rationale == "same value"


async def test_slightly_broken_json_is_repaired():
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", judge_llm("{'rationale': 'ok', 'score': 100,}"))
    assert verdict.status == JUDGED and verdict.rating == 100


async def test_an_invalid_reply_is_re_asked_once_with_the_reason():
    llm = judge_llm('{"rationale": "too good", "score": 150}', '{"rationale": "fixed", "score": 90}')
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", llm)
    assert verdict.status == JUDGED and verdict.rating == 90
    assert verdict.usage.calls == 2
    retry = llm.history[1]
    assert [m.role for m in retry.messages] == ["user", "assistant", "user"]
    assert "score: 150 is greater than the maximum of 100" in retry.messages[-1].content
    assert retry.prompt_name == "loong_judge+judge_retry"


async def test_a_judge_that_stays_unusable_fails_the_verdict_at_worst():
    llm = judge_llm("I think it is fine.", "Still no JSON.")
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", llm)
    assert verdict.status == JUDGE_FAILED and not verdict.correct and verdict.rating is None
    assert "no JSON object" in verdict.error and len(llm.history) == 2


async def test_an_endpoint_error_gives_a_judge_error_and_a_config_error_stops():
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", judge_llm(ProviderError("503 busy", status=503)))
    assert verdict.status == JUDGE_ERROR and "503 busy" in verdict.error
    with pytest.raises(EndpointUnreachable):
        await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", judge_llm(EndpointUnreachable("down")))


async def test_a_failed_judge_call_still_reports_the_tokens_it_spent():
    failed = OutputError("the reply was cut at max_tokens=64 with nothing complete in it")
    failed.usage = Usage(calls=2, prompt_tokens=900, completion_tokens=128)  # what the layers attach
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", judge_llm(failed))
    assert verdict.status == JUDGE_ERROR
    assert (verdict.usage.calls, verdict.usage.prompt_tokens, verdict.usage.completion_tokens) == (2, 900, 128)


async def test_an_empty_answer_scores_worst_without_a_judge_call():
    llm = judge_llm()
    task = make_task("c1", "How many?", "215", benchmark="corpusqa")
    for answer in ("", "   ", "Reasoning only. The answer is:  "):
        verdict = await judge_answer(judge_spec("corpusqa", protocol="r3con"), task, answer, llm)
        assert verdict.status == EMPTY and not verdict.correct
    assert llm.history == []


async def test_corpusqa_judges_only_the_final_answer():
    llm = judge_llm('{"rationale": "r", "equivalent": false}')
    task = make_task("c1", "How many?", "215", benchmark="corpusqa")
    verdict = await judge_answer(judge_spec("corpusqa", protocol="r3con"), task, "long reasoning 999\nThe answer is: 214", llm)
    assert not verdict.correct
    prompt = llm.history[0].messages[0].content
    assert "<answer>\n214\n</answer>" in prompt and "999" not in prompt


async def test_upstream_reply_formats_are_understood():
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", judge_llm("Evidence: fine.\nRating: [[100]]"))
    assert verdict.rating == 100 and verdict.correct
    task = make_task("c1", "q", "1", benchmark="corpusqa")
    verdict = await judge_answer(judge_spec("corpusqa", protocol="r3con"), task, "1", judge_llm("Same. [[YES]]"))
    assert verdict.correct


async def test_dracula_needs_count_and_victims_and_judges_the_lenient_gold_apart():
    task = make_task("death_toll", "How many?", "13: ...", benchmark="dracula")
    task = type(task)(**{**task.__dict__, "gold_lenient": "12: without Mr. Swales"})

    def reply(count, victims):
        return json.dumps({"rationale": "r", "count_correct": count, "victims_correct": victims})

    llm = judge_llm(reply(False, True), reply(True, True))  # strict: wrong count; lenient: right
    verdict = await judge_answer(judge_spec("dracula"), task, "12 people", llm)
    assert verdict.status == JUDGED and not verdict.correct and verdict.lenient_correct is True
    assert "<gold>\n13: ...\n</gold>" in llm.history[0].messages[0].content
    assert "<gold>\n12: without Mr. Swales\n</gold>" in llm.history[1].messages[0].content
    assert verdict.usage.calls == 2

    llm = judge_llm(reply(True, True), reply(False, False))
    verdict = await judge_answer(judge_spec("dracula"), task, "13 people", llm)
    assert verdict.correct and verdict.lenient_correct is True  # right on the strict gold is right leniently

    llm = judge_llm(reply(True, False), reply(True, False))
    verdict = await judge_answer(judge_spec("dracula"), task, "13, wrong names", llm)
    assert not verdict.correct and verdict.lenient_correct is False


async def test_a_judge_prompt_from_a_file_replaces_the_builtin(tmp_path):
    path = tmp_path / "judge.j2"
    path.write_text("Q: <task>{{ task }}</task> A: <answer>{{ answer }}</answer> G: <gold>{{ gold }}</gold>")
    spec = judge_spec("loong", prompt_from_file(path))
    llm = judge_llm('{"rationale": "", "score": 100}')
    verdict = await judge_answer(spec, LOONG, "x", llm)
    assert llm.history[0].messages[0].content == "Q: <task>What is the EPS of Acme?</task> A: <answer>x</answer> G: <gold>-$0.04</gold>"
    assert verdict.prompt_name == "file:judge.j2"


async def test_a_prompt_with_an_unknown_variable_fails_strictly(tmp_path):
    path = tmp_path / "judge.j2"
    path.write_text("{{ task }} {{ reference }}")
    spec = judge_spec("loong", prompt_from_file(path))
    with pytest.raises(ConfigError, match="'reference' is undefined.*task, answer, gold"):
        await judge_answer(spec, LOONG, "x", judge_llm())
    path.write_text("{% if %}")
    with pytest.raises(ConfigError, match="not a valid Jinja template"):
        prompt_from_file(path)


def test_every_builtin_prompt_carries_the_protocol_tags():
    for benchmark in ("loong", "corpusqa", "dracula"):
        prompt = judge_spec(benchmark, protocol="r3con").prompt
        assert isinstance(prompt, JudgePrompt)
        text = prompt.render(task="T", answer="A", gold="G")
        assert "<task>\nT\n</task>" in text and "<answer>\nA\n</answer>" in text and "<gold>\nG\n</gold>" in text


# The official protocol: each crafted reply read as the benchmark's own code reads it
# (MozerWang/Loong src/utils/metric.py extract_number; Tongyi-Zhiwen/CorpusQA src/eval.py).

LOONG_REPLIES = [
    ("Evaluation evidence: close.\nRating: [[87.5]]", JUDGED, 87.5, False),
    ("Evaluation evidence: one slip.\nRating: [85]", JUDGED, 85.0, False),
    ("Evaluation evidence: all there.\nRating: [[100]]", JUDGED, 100.0, True),
    ("Rating: [[100.0]]", JUDGED, 100.0, True),
    ("Earlier [7] then Rating: [[60]]", JUDGED, 60.0, False),  # [[N]] wins wherever it is
    ("Rating: [[ 90 ]]", JUDGE_FAILED, None, False),  # upstream's pattern has no room for spaces
    ('{"rationale": "matches", "score": 100}', JUDGE_FAILED, None, False),  # r3con's old JSON: no score upstream
    ("Evaluation evidence: fine.\nRating: excellent", JUDGE_FAILED, None, False),
]


@pytest.mark.parametrize(("reply", "status", "rating", "correct"), LOONG_REPLIES)
async def test_loong_official_reads_a_reply_as_upstream_does(reply, status, rating, correct):
    llm = judge_llm(reply)
    verdict = await judge_answer(judge_spec("loong"), LOONG, "EPS was -$0.04.", llm)
    assert (verdict.status, verdict.rating, verdict.correct) == (status, rating, correct)
    (request,) = llm.history  # one call: no re-ask, no schema, the reply format named by the mode
    assert request.response_schema is None and request.mode == "rating" and request.stage == "judge"


def test_loong_official_prompt_is_upstreams_filled_as_upstream_fills_it():
    row = {"type": "financial", "question": "Q?", "instruction": "Answer briefly.",
           "prompt_template": "{instruction}\n#Reports:\n{docs}\n#Question: {question}"}
    task = EvalTask(id="t", benchmark="loong", task_text="ignored", documents=(), gold="['A', 'B']",
                    judge_question=judge_question(row), judge_gold=str(["A", "B"]))
    spec = judge_spec("loong")
    assert spec.protocol == OFFICIAL and isinstance(spec.prompt, OfficialPrompt)
    (message,) = spec.prompt.messages(task.judge_question, "A and B", task.judge_gold)
    template = (OFFICIAL_DIR / "loong_judge.txt").read_text(encoding="utf-8")
    assert message.role == "user"
    assert message.content == template.format("Answer briefly.\n#Reports:\n\n#Question: Q?", "['A', 'B']", "A and B")
    assert message.content.endswith("Rating: [[score]]\n<end output>\n\nNow, start your evaluation:")
    paper = {**row, "type": "paper"}
    assert "{docs}" in judge_question(paper), "upstream leaves the slot in paper tasks"


def test_official_prompt_files_are_the_recorded_upstream_text():
    sources = json.loads((OFFICIAL_DIR / "sources.json").read_text(encoding="utf-8"))
    files = {name for name in sources if name.endswith(".txt")}
    assert files == {p.name for p in OFFICIAL_DIR.glob("*.txt")}
    for name in files:
        entry = sources[name]
        assert len(entry["commit"]) == 40 and entry["repository"] and entry["path"].endswith(".py")
        assert hashlib.sha256((OFFICIAL_DIR / name).read_bytes()).hexdigest() == entry["sha256"], name


CORPUSQA_VERDICTS = [
    ("Both say 215.\n[[YES]]", JUDGED, True),
    ("Different.\n[[NO]]", JUDGED, False),
    ("Same. [[ yes ]]", JUDGE_FAILED, False),  # case and spaces matter upstream
    ("Same. [[yes]]", JUDGE_FAILED, False),
    ("First [[YES]], on reflection [[NO]]", JUDGED, False),  # both: never YES
    ("[[NO]] at first, then [[YES]]", JUDGED, False),
    ("They look equivalent.", JUDGE_FAILED, False),
]


@pytest.mark.parametrize(("reply", "status", "correct"), CORPUSQA_VERDICTS)
async def test_corpusqa_official_reads_the_verdict_as_upstream_does(reply, status, correct):
    task = make_task("financial_en_1", "How many?", "215", benchmark="corpusqa")
    llm = judge_llm(reply)
    verdict = await judge_answer(judge_spec("corpusqa"), task, "The answer is: 215", llm)
    assert (verdict.status, verdict.correct) == (status, correct)
    (request,) = llm.history
    assert request.response_schema is None and request.mode == "yes_no"


ANSWERS = [
    ("reasoning\nThe answer is: 215\nso that is it", "215"),  # to the end of its line
    ("The answer is: 1\nchecking again\nThe answer is: 2", "1"),  # the first, not the last
    ("reasoning\nthe answer is: 215", "reasoning\nthe answer is: 215"),  # lowercase: the whole reply
    ("The answer is:215", "The answer is:215"),  # the space after the colon is part of the pattern
    ("The answer is: **215**", "**215**"),  # bold kept
]


@pytest.mark.parametrize(("answer", "shown"), ANSWERS)
async def test_corpusqa_official_shows_the_judge_what_upstream_extracts(answer, shown):
    task = make_task("financial_en_1", "How many?", "215", benchmark="corpusqa")
    llm = judge_llm("[[NO]]")
    await judge_answer(judge_spec("corpusqa"), task, answer, llm)
    system, user = llm.history[0].messages
    template = (OFFICIAL_DIR / "corpusqa_judge_user.txt").read_text(encoding="utf-8")
    assert system.role == "system" and system.content == (OFFICIAL_DIR / "corpusqa_judge_system.txt").read_text(encoding="utf-8")
    assert user.content == template.format(problem="How many?", answer_1=shown, answer_2="215")


def test_a_judge_prompt_file_needs_r3cons_protocol(tmp_path):
    path = tmp_path / "mine.j2"
    path.write_text("{{ task }} {{ answer }} {{ gold }}")
    assert judge_spec("loong", prompt_from_file(path)).protocol == "r3con"
    with pytest.raises(ConfigError, match="--judge-protocol r3con"):
        judge_spec("loong", prompt_from_file(path), protocol=OFFICIAL)
    with pytest.raises(ConfigError, match="no official judge protocol"):
        judge_spec("dracula", protocol=OFFICIAL)


def test_the_judge_is_the_papers_where_a_judge_key_is_set_and_the_runs_endpoint_otherwise():
    assert choose_judge("loong", env={}) == JudgeChoice("endpoint")
    paper = choose_judge("loong", env={"R3CON_JUDGE_API_KEY": "k"})
    assert paper == JudgeChoice("paper", PAPER_JUDGE, "https://api.openai.com/v1", "k")
    own = choose_judge("corpusqa", "benchmark", api_key="k", env={})
    assert own.model == "deepseek-v3" and own.base_url.startswith("https://dashscope.aliyuncs.com")
    assert choose_judge("loong", "benchmark", env={"R3CON_JUDGE_BASE_URL": "http://judge/v1"}) == JudgeChoice(
        "benchmark", "gpt-4-turbo-2024-04-09", "http://judge/v1", None)
    assert choose_judge("loong", env={"OPENAI_API_KEY": "k"}).who == "endpoint", "the run's own key is not a judge key"
    with pytest.raises(ConfigError, match="R3CON_JUDGE_API_KEY") as info:
        choose_judge("loong", "paper", env={})
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="no judge of its own"):
        choose_judge("dracula", "benchmark", api_key="k")


async def test_r3cons_protocol_reads_a_reply_in_the_benchmarks_format_with_its_parser_without_a_re_ask():
    llm = judge_llm("Evaluation evidence: close.\nRating: [[87.5]]")
    verdict = await judge_answer(judge_spec("loong", protocol="r3con"), LOONG, "x", llm)
    assert (verdict.status, verdict.rating, verdict.correct, len(llm.history)) == (JUDGED, 87.5, False, 1)
    task = make_task("c1", "q", "1", benchmark="corpusqa")
    both = await judge_answer(judge_spec("corpusqa", protocol="r3con"), task, "1", judge_llm("[[YES]] or [[NO]]"))
    assert both.status == JUDGED and not both.correct
