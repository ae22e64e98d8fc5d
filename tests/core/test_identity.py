"""A request is known by what is sent: the cache, the reuse record and resume key on the request as it
leaves for the endpoint, after every layer that rewrites it; and the features that key on it hold together."""

import json

import r3con
from r3con.corpus.documents import documents_from_texts
from r3con.pipeline.method import run
from r3con.testing import FakeLLMServer

TASK = "Who recorded crates of tin, and how many?"


def ledgers(n: int, repeat: int = 40) -> list[tuple[str, str]]:
    return [(f"Ledger {i}", " ".join(f"Clerk{i} {w} recorded {j} crates of tin at dock {i}."
                                     for j, w in enumerate(["Ann", "Bob", "Cy", "Dee"] * repeat))) for i in range(n)]


def outputs(result) -> tuple[bytes, ...]:
    folder = result.run_dir
    return (*(p.read_bytes() for p in sorted((folder / "notes").glob("round-*.json"))),
            (folder / "records.json").read_bytes(), (folder / "answer.txt").read_bytes())


def settings(server, tmp_path, cache: str | None, **extra) -> r3con.Settings:
    return r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path / "runs", concurrency=2,
                                  reasoning="direct", cache=cache is not None,
                                  cache_path=tmp_path / cache if cache else None, **extra)


async def test_a_lowered_reply_cap_asks_again_and_gives_a_fresh_runs_result(tmp_path):
    docs = documents_from_texts(ledgers(3, repeat=4))
    with FakeLLMServer() as server:
        await run(TASK, docs, settings(server, tmp_path, "llm.sqlite"))
        before = len(server.calls())
        capped = await run(TASK, docs, settings(server, tmp_path, "llm.sqlite", max_tokens_cap=40))
        asked = server.calls()[before:]
        fresh = await run(TASK, docs, settings(server, tmp_path, None, max_tokens_cap=40))
    assert asked, "a request with another max_tokens is another request: neither the cache nor reuse answers it"
    assert all(c["max_tokens"] <= 40 for c in asked)
    assert outputs(capped) == outputs(fresh)


async def test_a_window_learned_mid_run_with_the_cache_on_finishes_and_resumes(tmp_path):
    # configured for 16,384 tokens, the server takes 4,096: the parts are planned again mid-run
    docs = documents_from_texts([(title, f"{text} {text}") for title, text in ledgers(3)])
    with FakeLLMServer(max_model_len=4096) as server:
        config = settings(server, tmp_path, "llm.sqlite", context_window=16_384)
        result = await run(TASK, docs, config)
        asked = len(server.calls())
        resumed = await run(TASK, docs, config, run_folder=result.run_dir)
        assert len(server.calls()) == asked, "the resume plans in the window learned: it sends nothing"
        again = await run(TASK, docs, config)
        answered = [c for c in server.calls() if c.get("status") == 200]
        assert len({c["request_hash"] for c in answered}) == len(answered), "no answered call is paid twice"
        assert len(server.calls()) == asked, "the repeat plans in the window the cache kept: nothing sent, none too long"
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["endpoint"]["learned_window"]["window"] == 4096
    kept = json.loads((again.run_dir / "manifest.json").read_text())["endpoint"]["learned_window"]
    assert kept["window"] == 4096 and kept["from_earlier_runs"] == 1, "taken from the cache, and said so"
    assert result.degraded == () and len(result.parts) > 3
    assert outputs(resumed) == outputs(result) == outputs(again)


SUBJECTS = ["the harbour", "the abbey", "the churchyard", "the cliffs", "the ship", "the storm", "the pier",
            "the lighthouse", "the market", "the station", "the river", "the bridge"]
LETTERS = [(f"Letter {i}", f"Traveller {i} went to Whitby and reported on {SUBJECTS[i % len(SUBJECTS)]}. "
            f"They stayed {i + 2} days. The weather on day {i} was grey and the sea was rough near {SUBJECTS[(i - 1) % len(SUBJECTS)]}. "
            + " ".join(f"On day {d} traveller {i} walked from {SUBJECTS[d % len(SUBJECTS)]} to {SUBJECTS[(d + i) % len(SUBJECTS)]}."
                       for d in range(60)))
           for i in range(14)]
WHITBY = "Who travelled to Whitby, and what did they report there?"


def changes() -> dict[str, list[tuple[str, str]]]:
    edited = list(LETTERS[:12])
    edited[5] = (edited[5][0], edited[5][1] + " A storm broke the mast of a Russian ship.")
    renamed = list(LETTERS[:12])
    renamed[3] = ("Letter 3 (copy)", renamed[3][1])
    return {"added": LETTERS, "interleaved": [*LETTERS[:6], LETTERS[13], *LETTERS[6:12]],
            "deleted": LETTERS[:4] + LETTERS[6:12], "edited": edited, "renamed": renamed}


async def test_exact_reuse_with_the_default_settings_is_a_fresh_runs_result(tmp_path):
    """Adaptive placement (on by default) reads the server's prefix cache: a reusing run whose earlier
    reads were replayed, not sent, must still place its calls as a fresh run would."""
    for name, corpus in changes().items():
        folder = tmp_path / name
        with FakeLLMServer() as first:  # the first run, on a server since restarted
            config = r3con.Settings.resolve(env={}, base_url=first.base_url, out_dir=folder / "runs",
                                            cache_path=folder / "llm.sqlite")
            await run(WHITBY, documents_from_texts(LETTERS[:12]), config)
        with FakeLLMServer() as server:
            reused = await run(WHITBY, documents_from_texts(corpus), replace_url(config, server))
        with FakeLLMServer() as server:
            fresh = await run(WHITBY, documents_from_texts(corpus), replace_url(config, server, cache=False))
        assert reused.usage.calls < fresh.usage.calls, name
        assert outputs(reused) == outputs(fresh), name


def replace_url(config: r3con.Settings, server, **extra) -> r3con.Settings:
    from dataclasses import replace
    return replace(config, base_url=server.base_url, **extra)
