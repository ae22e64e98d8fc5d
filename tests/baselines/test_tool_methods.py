"""arag and fileagent: their tools (search, read; files confined to the scratch folder) and runs over tool calling."""

import json
import os

import pytest

from r3con.baselines import arag, fileagent
from r3con.baselines._common import chunk_documents
from r3con.baselines._graph import lexical_vectors
from r3con.baselines._toolagent import ToolError, dispatch
from r3con.corpus.documents import Document
from r3con.llm.types import ToolCall

from ._helpers import CORPORA, check_outcome, logged_calls, run, task, transcript


def _docs():
    return (Document(number=1, title="Ships", text="The Demeter sailed from Varna. " * 30),
            Document(number=2, title="Banks", text="Revenue of Acme rose. Profit fell at Acme. " * 30))


async def test_arag_tools_search_and_read_chunks_once():
    chunks = chunk_documents(_docs(), 100)
    sentences, owners = arag.split_corpus(chunks)

    async def embed(query):
        return lexical_vectors([*sentences, query])[-1]

    corpus = arag.Corpus(chunks, sentences, owners, lexical_vectors(sentences))
    tools = {t.name: t for t in arag.corpus_tools(corpus, embed, arag.Options(results=2))}
    found, ok = await dispatch(tools, ToolCall("1", "keyword_search", '{"keywords": ["demeter", "VARNA"]}'), 10_000)
    assert ok and found.count("\n") == 1 and all("(document 1: Ships): The Demeter sailed from Varna." in line
                                                 for line in found.splitlines())
    found, ok = await dispatch(tools, ToolCall("2", "semantic_search", '{"query": "how the profit fell"}'), 10_000)
    assert ok and "(document 2: Banks): Profit fell at Acme." in found.splitlines()[0]
    last = len(chunks) - 1
    text, ok = await dispatch(tools, ToolCall("3", "chunk_read", f'{{"chunk_ids": [{last - 1}, {last}]}}'), 10**6)
    assert ok and text.count("[chunk ") == 2 and chunks[last].text in text
    again, ok = await dispatch(tools, ToolCall("4", "chunk_read", f'{{"chunk_ids": [{last}]}}'), 10**6)
    assert ok and again == f"[chunk {last} was already read (read call 1); it is above]"  # the context tracker
    missing, ok = await dispatch(tools, ToolCall("5", "chunk_read", '{"chunk_ids": [99999]}'), 10_000)
    assert not ok and "99999 is greater than the maximum" in missing
    assert arag.keyword_scores(["Acme acme", "Varna"], ["ACME", "varna"]) == [8.0, 5.0]


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "scratch"
    root.mkdir()
    fileagent.write_files(root, _docs())
    (tmp_path / "secret.txt").write_text("the password\n")
    return fileagent.Folder(root, fileagent.Options(read_lines=3, grep_matches=5))


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "/etc/passwd", "~/x", "link.txt", "linkdir/secret.txt"])
async def test_file_tools_refuse_paths_out_of_the_scratch_folder(folder, path):
    os.symlink(folder.root.parent / "secret.txt", folder.root / "link.txt")
    os.symlink(folder.root.parent, folder.root / "linkdir")
    with pytest.raises(ToolError):
        await folder.read_file(path)
    with pytest.raises(ToolError):
        await folder.grep("password", path)
    assert "password" not in await folder.grep("password")  # the symlinks lead out: grep skips them
    assert "link.txt" not in await folder.list_files()


async def test_file_tools_list_grep_and_read_lines(folder):
    listing = await folder.list_files()
    assert listing.splitlines()[0].startswith("001-Ships.txt\t") and "002-Banks.txt" in listing
    hits = await folder.grep("profit", "002-Banks.txt")
    assert hits.startswith("002-Banks.txt:1:") and "first 5 matches" not in hits
    (folder.root / "many.txt").write_text("\n".join(f"line {i}" for i in range(1, 11)))
    assert (await folder.grep("^line")).endswith("many.txt:5:line 5\n[first 5 matches; narrow the pattern for the rest]")
    lines = await folder.read_file("001-Ships.txt", 1, 100)
    assert lines.startswith("1\tThe Demeter") and "[lines 1-1 of 1]" not in lines
    with pytest.raises(ToolError, match="not a file"):
        await folder.read_file("nothing.txt")
    assert await folder.read_file("many.txt", 2, 9) == "2\tline 2\n3\tline 3\n4\tline 4\n[lines 2-4 of 10]"


@pytest.mark.parametrize("corpus", CORPORA)
async def test_arag_runs_end_to_end_over_tool_calls(corpus, fake_server, tmp_path):
    outcome = await run(arag.method(), task(corpus), fake_server, tmp_path, embedding_model="hash-embed")
    check_outcome(outcome, fake_server, {"arag-agent"})
    log = transcript(outcome)
    assert all(s["ok"] for s in log["steps"]) and not outcome.capped and log["vectors"] == "dense"
    calls = [c for c in logged_calls(outcome) if c["stage"] == "arag-agent"]
    assert [t["function"]["name"] for t in calls[0]["request"]["tools"]] == ["keyword_search", "semantic_search", "chunk_read"]
    _each_tool_call_ran_and_was_answered(log, calls)


def _each_tool_call_ran_and_was_answered(log, calls):
    """Whatever the model asks: every tool call it made ran, in its order, with its arguments, and its
    result went back to the model as the next call's tool message; the last reply, with no call, ends it."""
    asked = [t for c in calls for t in (c["response"].get("tool_calls") or [])]
    assert asked and not calls[-1]["response"].get("tool_calls")
    assert [(s["tool"], s["arguments"]) for s in log["steps"]] == \
        [(t["function"]["name"], t["function"]["arguments"]) for t in asked]
    for call, after in zip(calls, calls[1:], strict=False):
        made = call["response"].get("tool_calls") or []
        answers = [m for m in after["request"]["messages"][-len(made):] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in answers] == [t["id"] for t in made]


@pytest.mark.parametrize("corpus", CORPORA)
async def test_fileagent_runs_end_to_end_in_the_sandbox(corpus, fake_server, tmp_path):
    outcome = await run(fileagent.method(), task(corpus), fake_server, tmp_path)
    check_outcome(outcome, fake_server, {"fileagent"})
    log = transcript(outcome)
    assert all(s["ok"] for s in log["steps"])
    _each_tool_call_ran_and_was_answered(log, [c for c in logged_calls(outcome) if c["stage"] == "fileagent"])
    assert log["files"] == len(task(corpus).documents)
    names = sorted(fileagent.file_name(i, d) for i, d in enumerate(task(corpus).documents))
    for step in log["steps"]:  # run_python's working directory is the folder of the documents as files
        code = json.loads(step["arguments"]).get("code", "") if step["tool"] == "run_python" else ""
        if "os.listdir('.')" in code:
            listed = [line.rsplit(" ", 1)[0] for line in step["observation"].splitlines()]  # may be cut short
            assert listed[:-1] == names[:len(listed) - 1] and names[len(listed) - 1].startswith(listed[-1])


async def test_the_turn_bound_caps_a_run(fake_server, tmp_path):
    outcome = await run(fileagent.method(fileagent.Options(max_turns=2)), task("loong-en"), fake_server, tmp_path)
    assert outcome.capped and len(transcript(outcome)["steps"]) == 2
    last = [c for c in logged_calls(outcome) if c["stage"] == "fileagent"][-1]
    assert last["request"]["tool_choice"] == "none" and outcome.answer
