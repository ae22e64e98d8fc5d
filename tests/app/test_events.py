"""A run's events as the page receives them (server-sent events, plain HTTP): every stage with its progress,
each call as it returns, and a run that fails says why in words, its folder listed as failed."""

from __future__ import annotations

from r3con.demo import corpus_dir, question
from r3con.testing import FakeLLMServer, FaultPlan

from .running import RunningApp, demo_state


def test_the_stream_carries_stages_progress_calls_and_the_end(tmp_path, fake_server):
    with RunningApp(demo_state(tmp_path, fake_server.base_url, [str(corpus_dir())])) as app:
        run = app.json("POST", "/api/runs", {"question": question()})["id"]
        events = app.events(run)
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "started" and kinds[-1] == "finished" and kinds.count("finished") == 1
        started = [e["stage"] for e in events if e["kind"] == "stage" and e["state"] == "started"]
        assert started == ["relevance", "schema", "populate", "reason"]
        calls = [e for e in events if e["kind"] == "call"]
        assert calls and all(e["prompt_tokens"] > 0 for e in calls if e["source"] == "endpoint")
        assert app.events(run) == events  # a late follower gets every event again, from the first


def test_a_failed_run_says_why_in_words_and_lists_as_failed(tmp_path):
    with FakeLLMServer(faults=FaultPlan.parse("empty=1.0,max=1000,only=relevance")) as server, \
            RunningApp(demo_state(tmp_path, server.base_url, [str(corpus_dir())], retries=0)) as app:
        run = app.json("POST", "/api/runs", {"question": question()})["id"]
        end = app.events(run)[-1]
        assert end["kind"] == "failed" and end["error"] and "Error:" not in end["error"]
        (listed,) = app.json("GET", "/api/runs")["runs"]
        assert listed["status"] == "failed"
        details = app.json("GET", f"/api/runs/{listed['name']}")
        assert details["error"].startswith("The run failed") and "Error:" not in details["error"]


def test_an_empty_question_is_refused_before_anything_starts(tmp_path, fake_server):
    with RunningApp(demo_state(tmp_path, fake_server.base_url, [str(corpus_dir())])) as app:
        status, body = app.request("POST", "/api/runs", {"question": "  "})
        assert status == 400 and "the question is empty" in body
        assert app.json("GET", "/api/runs")["runs"] == []
