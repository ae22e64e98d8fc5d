"""The judges' and the baselines' scripted replies come from the request's shape, whatever the tags are called."""

import json
import urllib.request

from r3con.eval.judges import JudgePrompt, OfficialPrompt, judge_spec, loong_official_score

SCORE = {"type": "object", "properties": {"rationale": {"type": "string"},
                                          "score": {"type": "integer", "minimum": 1, "maximum": 100}}}


def ask(server, stage: str, prompt: str, schema: dict | None = None, mode: str = "",
        history: list[dict] | None = None, doc: str = "") -> str:
    body: dict = {"model": "m", "messages": [{"role": "user", "content": prompt}, *(history or [])]}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}
    headers = {"X-R3con-Stage": stage, **({"X-R3con-Mode": mode} if mode else {}), **({"X-R3con-Doc": doc} if doc else {})}
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())["choices"][0]["message"]["content"]


def test_a_judge_prompt_of_ones_own_scores_a_right_answer_above_a_wrong_one(fake_server):
    mine = JudgePrompt("mine", "Grade it.\n<q>\n{{ task }}\n</q>\n<ref>\n{{ gold }}\n</ref>\n<cand>\n{{ answer }}\n</cand>\nJSON.")
    spec = judge_spec("loong", mine)
    gold = "The Vasa and the Mary Rose sank"

    def score(answer: str) -> int:
        prompt = spec.prompt.render(task="Which ships sank?", gold=gold, answer=answer)
        return int(json.loads(ask(fake_server, "judge", prompt, dict(spec.schema)))["score"])

    assert score("The Mary Rose and the Vasa sank") == 100
    assert score("Nothing sank; the weather was calm") < 30


def ask_messages(server, stage: str, messages: list[dict], mode: str) -> str:
    body = {"model": "m", "messages": messages}
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "X-R3con-Stage": stage,
                                              "X-R3con-Mode": mode})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())["choices"][0]["message"]["content"]


def test_the_official_judge_prompts_get_replies_in_their_official_format(fake_server):
    gold = "The Vasa and the Mary Rose sank"
    for benchmark, mode in (("loong", "rating"), ("corpusqa", "yes_no")):
        prompt = judge_spec(benchmark).prompt
        assert isinstance(prompt, OfficialPrompt)

        def reply(answer: str, prompt: OfficialPrompt = prompt, mode: str = mode) -> str:
            messages = [m.to_openai() for m in prompt.messages("Which ships sank?", answer, gold)]
            return ask_messages(fake_server, "judge", messages, mode)

        right, wrong = reply("The Mary Rose and the Vasa sank"), reply("Nothing sank; the weather was calm")
        if benchmark == "loong":
            assert loong_official_score(right) == 100 and (loong_official_score(wrong) or 100) < 30
            assert right.splitlines()[-1] == "Rating: [[100]]"
        else:
            assert "[[YES]]" in right and "[[NO]]" not in right and "[[NO]]" in wrong


def test_a_judge_prompt_in_another_wording_of_the_same_shape_is_read_the_same(fake_server):
    def rate(answer: str) -> float | None:
        prompt = f"[Query]\nWhich ships sank?\n\n[Reference]\nThe Vasa sank\n\n[Candidate]\n{answer}\n\n[Task]\nGrade it."
        return loong_official_score(ask_messages(fake_server, "judge", [{"role": "user", "content": prompt}], "rating"))

    assert rate("the Vasa sank") == 100 and (rate("a calm day") or 100) < 30
    listed = "[Query]\nq\n[Reference]\n[\"Vasa\", \"Mary Rose\"]\n[Candidate]\n[\"Mary Rose\", \"Vasa\"]\n[Task]\nGrade."
    reply = ask_messages(fake_server, "judge", [{"role": "user", "content": listed}], "rating")
    assert loong_official_score(reply) == 100, "a JSON list inside a block is not a header"
    pair = ask_messages(fake_server, "judge", [{"role": "user", "content": "Task: q\nReply 1: Vasa\nReply 2: Vasa"}], "yes_no")
    assert "[[YES]]" in pair


def test_memagent_keeps_its_memory_and_adds_what_the_section_says(fake_server):
    prompt = ("<goal>\nWhen did the Vasa sink?\n</goal>\n\n<kept>\nThe Vasa was a warship.\n</kept>\n\n"
              '<chunk doc="2" name="Log">\nThe garden is lovely. The Vasa sank in 1628.\n</chunk>\n\nUpdate it.')
    reply = ask(fake_server, "memagent-read", prompt)
    assert reply.splitlines() == ["The Vasa was a warship.", "The Vasa sank in 1628."]


def test_readagent_looks_up_the_pages_whose_gists_match_the_task(fake_server):
    prompt = ('<all>\n<g p="1" d="1">\nA recipe for bread.\n</g>\n<g p="2" d="1">\nThe Vasa sank in the harbour.\n</g>\n'
              "</all>\n\n<goal>\nWhere did the Vasa sink?\n</goal>")
    assert ask(fake_server, "readagent-lookup", prompt).startswith("I want to look up Page [2]")


def test_the_code_agents_second_step_guards_itself_instead_of_reading_the_error(fake_server):
    history = [{"role": "assistant", "content": "```python\nprint(1)\n```"},
               {"role": "user", "content": "Observation: something failed"}]
    for stage in ("codeagent", "rlm"):
        reply = ask(fake_server, stage, "<goal>\nWhich ships sank?\n</goal>", mode="code", history=history)
        code = reply.split("```python\n", 1)[1].rsplit("```", 1)[0]
        compile(code, stage, "exec")
        assert "except Exception:" in code and code.rstrip().splitlines()[-1].startswith("final_answer(")


def test_a_chinese_document_gets_a_note_from_its_sentences_on_the_task(fake_server):
    prompt = ('<doc n="1" t="报告">\n公司本期营业收入为100万元。天气晴朗。英力特的公允价值变动收益为5万元。\n</doc>\n\n'
              "<q>\n英力特的公允价值变动收益是多少？\n</q>")
    note = ask(fake_server, "relevance", prompt, doc="1")
    assert "英力特的公允价值变动收益为5万元。" in note and "天气" not in note


def test_a_summary_keeps_within_max_tokens_as_a_model_told_its_length_does(fake_server):
    texts = "\n".join(f'<text source="{i}">\n英力特的公允价值变动收益为{i}万元。\n</text>' for i in range(10))
    body = {"model": "m", "max_tokens": 60, "messages": [{"role": "user", "content": f"Summarise.\n\n{texts}"}]}
    request = urllib.request.Request(f"{fake_server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "X-R3con-Stage": "raptor-summarize"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        choice = json.loads(reply.read())["choices"][0]
    assert choice["finish_reason"] == "stop", "ten texts' first sentences (~170 tokens) shortened to fit 60"
    assert choice["message"]["content"].startswith("英力特的公允价值变动收益为0万元。")
