"""The SQLite cache of LLM calls: keys, what is never stored, concurrency, and free reruns over HTTP."""

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading

import pytest

import r3con
from r3con.llm.cache import CallCache, cache_key, usable
from r3con.llm.layers.answered import Answered
from r3con.llm.layers.limits import ConcurrencyLimited
from r3con.llm.types import ChatRequest, Completion, Message, Usage

from ..conftest import r3con_cli
from ..fakes import SIMPLE_SCHEMA, ScriptedLLM


def request(text="hello", **kw) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), stage="relevance", model="m", **kw)


def reply(content="ok", finish="stop", **kw) -> Completion:
    kw.setdefault("usage", Usage(calls=1, prompt_tokens=10, completion_tokens=2))
    return Completion(content=content, finish_reason=finish, model="m", **kw)


def test_key_covers_endpoint_model_messages_parameters_schema_and_sample():
    base = cache_key("http://a/v1", request())
    assert cache_key("http://a/v1/", request()) == base
    others = [
        cache_key("http://b/v1", request()),
        cache_key("http://a/v1", request("hello!")),
        cache_key("http://a/v1", request().with_model("other")),
        cache_key("http://a/v1", request(max_tokens=5)),
        cache_key("http://a/v1", request(temperature=0.7)),
        cache_key("http://a/v1", request(response_schema=SIMPLE_SCHEMA)),
        cache_key("http://a/v1", request(sample=1)),
        cache_key("http://a/v1", ChatRequest(messages=(Message("user", "hello", cache_breakpoint=True),),
                                            stage="relevance", model="m")),
        cache_key("http://a/v1", ChatRequest(messages=(Message("system", "hello"),), stage="relevance", model="m")),
        # where one message ends and the next begins is part of the key
        cache_key("http://a/v1", ChatRequest(messages=(Message("user", "hel"), Message("user", "lo")),
                                            stage="relevance", model="m")),
    ]
    assert len({base, *others}) == len(others) + 1
    # who asks (stage, document, prompt name) does not change what is asked
    assert cache_key("http://a/v1", request(doc=3, prompt_name="x")) == base


def test_a_request_copied_with_another_model_is_fingerprinted_afresh():
    asked = request()
    asked.fingerprint()  # memoised on the request
    moved = asked.with_model("other")
    fresh = ChatRequest(messages=(Message("user", "hello"),), stage="relevance", model="other")
    assert moved == fresh and moved.fingerprint() == fresh.fingerprint() != asked.fingerprint()


def test_store_and_read_back_across_connections_in_wal_mode(tmp_path):
    path = tmp_path / "c" / "llm.sqlite"
    cache = CallCache(path)
    cache.put("k", "http://a/v1", "relevance", reply("a note", reasoning="thought"))
    cache.close()
    again = CallCache(path)
    hit = again.get("k")
    assert hit is not None and hit.from_cache
    assert (hit.content, hit.reasoning, hit.finish_reason, hit.model) == ("a note", "thought", "stop", "m")
    assert (hit.usage.prompt_tokens, hit.usage.completion_tokens) == (10, 2)
    assert again.get("missing") is None
    assert again._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("completion, structured, ok", [
    (reply("a note"), False, True),
    (reply("", reasoning="the note, in reasoning_content"), False, True),
    (reply("a note cut sh", finish="length"), False, False),
    (reply("a note cut. (cut)", finish="length", usage=Usage(calls=1, events={"length": 1, "cut_kept": 1})),
     False, True),  # what the run kept of a cut reply: a resume gets it again without paying
    (reply(""), False, False),
    (reply("   "), False, False),
    (reply("", refusal="I can't help with that"), False, False),
    (reply("no", finish="content_filter"), False, False),
    (reply('{"people": [{"name": "Ann"}]}'), True, True),
    (reply('Here you are:\n```json\n{"people": [{"name": "Ann"}]}\n```'), True, True),
    (reply('{"people": [{"name": "Ann"}]'), True, True),  # json-repair recovers it, as the stage does
    (reply('{"people": [{"age": 3}]}'), True, False),  # fails the schema: name is required
    (reply("I found no people."), True, False),
])
def test_only_usable_replies_are_cacheable(completion, structured, ok):
    req = request(response_schema=SIMPLE_SCHEMA if structured else None)
    assert usable(req, completion) is ok


async def test_cached_layer_serves_repeats_and_skips_unusable(tmp_path):
    answers = iter(["", "second try", "never asked"])
    inner = ScriptedLLM(default=lambda r: next(answers))
    layer = Answered(inner, cache=CallCache(tmp_path / "llm.sqlite"), endpoint="http://a/v1")
    first = await layer.complete(request())
    assert first.content == "" and not first.from_cache
    second = await layer.complete(request())  # the empty reply was not stored: asked again
    assert second.content == "second try" and not second.from_cache
    third = await layer.complete(request())
    assert third.content == "second try" and third.from_cache
    assert len(inner.history) == 2
    await layer.complete(request(sample=1))  # another sample of the same prompt is another call
    assert len(inner.history) == 3


async def test_a_reply_is_committed_before_its_slot_sends_the_next_request(tmp_path):
    """A run killed at any moment loses at most the replies still in flight: one per concurrent slot."""
    cache = CallCache(tmp_path / "llm.sqlite")
    first_key = cache_key("http://a/v1", request("first"))
    stored_when_sent: list[bool] = []

    class Server:
        async def complete(self, req: ChatRequest) -> Completion:
            stored_when_sent.append(cache.get(first_key) is not None)
            await asyncio.sleep(0)
            return reply()

    layer = Answered(ConcurrencyLimited(Server(), 1), cache=cache, endpoint="http://a/v1")
    await asyncio.gather(layer.complete(request("first")), layer.complete(request("second")))
    assert stored_when_sent == [False, True]


def test_concurrent_processes_share_one_cache_file(tmp_path):
    path = tmp_path / "llm.sqlite"
    script = textwrap.dedent(f"""
        import sys
        from r3con.llm.cache import CallCache
        from r3con.llm.types import Completion, Usage
        cache = CallCache({str(path)!r})
        me = sys.argv[1]
        for i in range(40):
            cache.put(f"{{me}}-{{i}}", "e", "s", Completion(content=f"{{me}} {{i}}", finish_reason="stop",
                      model="m", usage=Usage(calls=1)))
            assert cache.get(f"{{me}}-{{i}}").content == f"{{me}} {{i}}"
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)], stderr=subprocess.PIPE, text=True)
             for n in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    cache = CallCache(path)
    assert len(cache) == 120
    assert cache.get("2-39").content == "2 39"


def test_a_fresh_cache_opens_while_another_opener_holds_its_write_lock(tmp_path):
    # what two runs started at once on a fresh cache do: one creates the tables (the write lock) while the
    # other switches the new file to WAL, a lock SQLite does not wait for by itself
    path = tmp_path / "llm.sqlite"
    path.touch()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, other.execute, ("COMMIT",))
    release.start()
    try:
        cache = CallCache(path)
    finally:
        release.join()
        other.close()
    cache.put("k", "e", "s", reply("kept"))
    assert cache.get("k").content == "kept"
    cache.close()


def test_several_open_one_fresh_cache_at_the_same_moment_and_none_fails(tmp_path):
    failed: list[str] = []

    def open_at(path, start: threading.Barrier) -> None:
        start.wait()
        try:
            CallCache(path).close()
        except Exception as exc:  # the test counts every failure, whatever it is
            failed.append(repr(exc))

    for attempt in range(40):
        path, start = tmp_path / f"{attempt}" / "llm.sqlite", threading.Barrier(8)
        threads = [threading.Thread(target=open_at, args=(path, start)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failed, failed[0]
    assert len(CallCache(path)) == 0


PRICES = {"r3con-scripted": {"input": 1.0, "output": 2.0}}


def _settings(server, tmp_path, **kw):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    return r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path / "runs", prices_file=prices,
                                  cache_path=tmp_path / "llm.sqlite", rounds=1, **kw)


async def test_rerun_makes_zero_calls_and_reports_the_savings(fake_server, tmp_path):
    docs = r3con.documents_from_texts([("Registry", "Ann Lee is 34 years old."), ("Letter", "Bob Stone is 41.")])
    settings = _settings(fake_server, tmp_path)
    first = await r3con.run("How old is each person?", docs, settings)
    made = len(fake_server.calls())
    assert made == first.usage.calls > 0 and first.usage.cache_hits == 0
    second = await r3con.run("How old is each person?", docs, settings)
    assert len(fake_server.calls()) == made  # not one call more
    assert second.answer == first.answer and second.records == first.records
    assert second.usage.calls == 0 and second.usage.cost_usd == 0
    assert second.usage.cache_hits == first.usage.calls
    assert second.usage.saved_tokens == first.usage.prompt_tokens + first.usage.completion_tokens
    assert second.usage.saved_usd == pytest.approx(first.usage.cost_usd)
    saved = json.loads((second.run_dir / "usage.json").read_text())
    assert saved["cache_hits"] == first.usage.calls and saved["by_stage"]["relevance"]["cache_hits"] == 2
    logged = [json.loads(line) for line in (second.run_dir / "calls.jsonl").read_text().splitlines()]
    assert logged and all(record["from_cache"] for record in logged)


async def test_no_cache_asks_again(fake_server, tmp_path):
    docs = r3con.documents_from_texts([("Registry", "Ann Lee is 34 years old.")])
    await r3con.run("How old is Ann?", docs, _settings(fake_server, tmp_path))
    made = len(fake_server.calls())
    await r3con.run("How old is Ann?", docs, _settings(fake_server, tmp_path, cache=False))
    assert len(fake_server.calls()) == 2 * made
    assert not (tmp_path / "elsewhere").exists()


def test_cli_cache_flags_and_summary(fake_server, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    args = ["run", "How old is Ann?", str(tmp_path / "docs"), "--base-url", fake_server.base_url,
            "--out", str(tmp_path / "runs"), "--cache", str(tmp_path / "my.sqlite")]
    first = r3con_cli(*args, "--json")
    assert first.returncode == 0, first.stderr
    made = len(fake_server.calls())
    assert (tmp_path / "my.sqlite").is_file()
    second = r3con_cli(*args)
    assert second.returncode == 0, second.stderr
    assert len(fake_server.calls()) == made
    closing = second.stderr.replace("\n  ", " ")  # the closing lines wrap at 80 columns
    assert "usage: 0 calls" in closing and f"{made} from cache" in closing
    third = r3con_cli(*args, "--no-cache", "--json", "--quiet")
    assert third.returncode == 0, third.stderr
    assert len(fake_server.calls()) == 2 * made
    assert json.loads(third.stdout)["usage"]["cache_hits"] == 0
    assert json.loads(first.stdout)["answer"] == json.loads(third.stdout)["answer"]


def test_the_default_cache_lives_under_xdg_cache_home(fake_server, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert r3con.Settings.resolve().cache_path == tmp_path / "xdg" / "r3con" / "llm.sqlite"
    (tmp_path / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old.")
    proc = r3con_cli("run", "How old is Ann?", str(tmp_path / "a.txt"), "--base-url", fake_server.base_url,
                     "--out", str(tmp_path / "runs"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "xdg" / "r3con" / "llm.sqlite").is_file()
    assert r3con.Settings.resolve(env={}).cache_path is None  # no home known: no cache


def test_a_new_cache_file_and_its_journal_are_private(tmp_path):
    import stat

    cache = CallCache(tmp_path / "new" / "llm.sqlite")
    try:
        files = [p for p in (tmp_path / "new").iterdir() if p.is_file()]
        assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), \
            [(p.name, oct(p.stat().st_mode)) for p in files]
    finally:
        cache.close()


def test_a_learned_window_is_kept_per_endpoint_model_and_stated_window_and_a_damaged_one_is_forgotten(tmp_path):
    import sqlite3

    from r3con.llm.window import Window

    learned = Window.of(8192)
    learned.learn(2048, 2225, 2000)
    cache = CallCache(tmp_path / "llm.sqlite")
    cache.put_window("http://h/v1", "m", 8192, learned.to_dict())
    assert cache.window("http://h/v1", "m", 8192) == learned.to_dict()
    assert cache.window("http://h/v1", "m", 16384) is None and cache.window("http://h/v1", "other", 8192) is None
    cache.close()
    again = Window.of(8192)
    reopened = CallCache(tmp_path / "llm.sqlite")  # another run, the same file
    again.restore(reopened.window("http://h/v1", "m", 8192), restored=True)
    assert again.planning == learned.planning and again.to_dict()["from_earlier_runs"] == 1
    reopened.close()
    with sqlite3.connect(tmp_path / "llm.sqlite") as db:
        db.execute("UPDATE windows SET learned = 'not json'")
    assert CallCache(tmp_path / "llm.sqlite").window("http://h/v1", "m", 8192) is None
