"""Reading a run folder for the report: notes' word diffs, the schema as tables, time per stage, secrets
left out, and a broken or partial folder read as far as it goes."""

import json

from r3con.config import Settings
from r3con.llm.layers.calllog import CallLog
from r3con.report._diff import changed_share, word_diff
from r3con.report._load import load, redact


def _folder(tmp_path, **files):
    for name, content in files.items():
        path = tmp_path / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return tmp_path


def test_word_diff_marks_added_and_removed_words_and_rebuilds_both_texts():
    old = "Harker visits the Count.\nNothing else."
    new = "Harker visits Count Dracula in his castle.\nNothing else."
    pieces = word_diff(old, new)
    assert "".join(t for op, t in pieces if op != "-") == new
    assert "".join(t for op, t in pieces if op != "+") == old
    assert ["-", "the "] in pieces and ["=", "Count"] in pieces
    assert ["+", " Dracula in his castle"] in pieces
    assert 0 < changed_share(pieces) < 1
    assert word_diff("same words", "same words") == [["=", "same words"]]
    assert word_diff("", "") == [] and word_diff(new, new) == [["=", new]]
    assert changed_share(word_diff("same", "same")) == 0.0


def test_notes_of_each_round_carry_their_diff_to_the_round_before(tmp_path):
    folder = _folder(tmp_path, **{
        "notes/round-1.json": [{"doc": "1", "title": "A", "note": "The ship sailed.", "refs": []}],
        "notes/round-2.json": [{"doc": "1", "title": "A", "note": "The Demeter sailed from Varna.", "refs": ["2"]}],
    })
    notes = load(folder)["notes"]["1"]
    assert [n["round"] for n in notes] == [1, 2] and "diff" not in notes[0]
    assert notes[1]["refs"] == ["2"] and ["-", "ship"] in notes[1]["diff"] and notes[1]["changed"] > 0


def test_schema_reads_as_tables_of_fields(tmp_path):
    schema = {"type": "object", "properties": {"deaths": {"type": "array", "description": "who died", "items": {
        "type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "description": "as named"},
            "cause": {"type": ["string", "null"], "enum": ["drowned", "bitten"]}}}}}}
    (table,) = load(_folder(tmp_path, **{"schema.json": schema}))["schema_tables"]
    assert table["name"] == "deaths" and table["description"] == "who died"
    assert table["fields"] == [
        {"name": "name", "type": "string", "required": True, "description": "as named"},
        {"name": "cause", "type": "string or null (drowned, bitten)", "required": False, "description": ""}]


def test_time_per_stage_runs_from_the_first_call_start_to_the_last_call_end(tmp_path):
    # `time` is when a call started (calls.jsonl's Recorded layer), `end` when it ended: a retried call's
    # latency_s is its last attempt's, so the end, not the latency, closes the span
    calls = [{"stage": "relevance", "time": 10.0, "latency_s": 2.0, "end": 12.0},
             {"stage": "relevance", "time": 11.0, "latency_s": 0.5, "end": 14.0},
             {"stage": "reason", "time": 20.0, "latency_s": 1.0}]  # a log from before `end`: start plus latency
    data = load(_folder(tmp_path, **{"calls.jsonl": "".join(json.dumps(c) + "\n" for c in calls)}))
    assert data["timing"] == {"relevance": {"wall_s": 4.0, "latency_s": 2.5}, "reason": {"wall_s": 1.0, "latency_s": 1.0}}
    assert data["calls"] == 3


def test_the_timing_the_run_kept_is_used_while_it_covers_the_log_and_the_log_is_read_once_it_does_not(tmp_path):
    calls = [{"stage": "relevance", "time": 10.0, "latency_s": 2.0, "end": 12.0, "usage": {"cost_usd": 0.5}},
             {"stage": "populate", "time": 13.0, "latency_s": 1.0, "end": 14.0, "usage": {"cost_usd": 0.25}}]
    log = CallLog(tmp_path / "calls.jsonl")
    for call in calls:
        log.write(call)
    kept = log.summary()
    log.close()
    assert kept.total() == 0.75 and kept.bytes == (tmp_path / "calls.jsonl").stat().st_size
    scanned = load(tmp_path)
    assert scanned["timing"] == kept.timing() and scanned["calls"] == 2, "the same figures as reading the log"
    marked = {**kept.to_dict(), "stages": {"relevance": {"wall_s": 99.0, "latency_s": 99.0}}}  # to tell them apart
    (tmp_path / "usage.json").write_text(json.dumps({"calls": 2, "calls_log": marked}))
    assert load(tmp_path)["timing"] == marked["stages"], "usage.json's summary covers the log: the log is not read"
    with (tmp_path / "calls.jsonl").open("a") as more:  # a later attempt, killed before it wrote usage.json
        more.write(json.dumps({"stage": "answer", "time": 20.0, "latency_s": 1.0}) + "\n")
    again = load(tmp_path)
    assert again["calls"] == 3 and again["timing"]["answer"] == {"wall_s": 1.0, "latency_s": 1.0}


def test_secrets_never_reach_the_report():
    assert redact({"api_key": "sk-live", "pdf_password": "pw", "model": "m", "api_key_env": None}) == \
        {"api_key": "***", "pdf_password": "***", "model": "m", "api_key_env": None}


def test_the_settings_table_shows_the_token_budgets():
    shown = redact(Settings().public())
    assert shown["note_max_tokens"] == Settings().note_max_tokens and shown["max_tokens_cap"] == 4096


def test_a_broken_partial_folder_is_read_as_far_as_it_goes_and_names_what_it_could_not_read(tmp_path):
    folder = _folder(tmp_path, **{
        "manifest.json": {"task": "Who?", "documents": [{"doc": 1, "title": "A", "source": "a.txt", "chars": 5}]},
        "records.json": "{not json",
        "calls.jsonl": json.dumps({"stage": "relevance", "time": 1.0, "latency_s": 0.5}) + "\n{\"stage\": \"rel",
        "error.json": {"stage": "populate", "kind": "error", "error": "RunFailed: all documents failed"},
    })
    data = load(folder)
    assert data["question"] == "Who?" and data["answer"] is None and data["error"]["stage"] == "populate"
    assert data["records"] == {} and data["calls"] == 1
    assert any(p.startswith("records.json: could not be read") for p in data["problems"])
    assert "calls.jsonl: 1 line(s) could not be read" in data["problems"]


def test_an_empty_folder_reads_as_a_run_with_nothing_in_it(tmp_path):
    data = load(tmp_path)
    assert data["documents"] == [] and data["answer"] is None and data["problems"] == [] and data["rounds"] == 0


def test_what_came_from_an_earlier_run_is_read_per_document_and_in_the_run_table(tmp_path):
    decisions = {"mode": "exact", "documents": {"2": {"relevance-1": {"reused": False, "why": "new document"}}}}
    folder = _folder(tmp_path, **{"manifest.json": {"task": "q", "reuse": {"mode": "exact", "previous_run": "runs/a"}},
                                  "reuse.json": decisions})
    data = load(folder)
    assert data["reuse"] == {"2": {"relevance-1": {"reused": False, "why": "new document"}}}
    assert data["run"]["reuse"]["previous_run"] == "runs/a"
    assert load(_folder(tmp_path / "other", **{"manifest.json": {"task": "q"}}))["reuse"] == {}


def test_a_large_runs_page_lists_the_documents_it_mentions_and_counts_every_input(tmp_path, monkeypatch):
    """Beyond TEXTS_UP_TO documents, the page keeps the documents it mentions (the first ones, the cited ones,
    those of its records) with their inputs, reuse and evidence counts; the totals stay whole."""
    from r3con.report import _load

    monkeypatch.setattr(_load, "TEXTS_UP_TO", 3)
    monkeypatch.setattr(_load, "RECORDS_UP_TO", 2)
    monkeypatch.setattr(_load, "LISTED_UP_TO", 1)
    n = 10
    docs = [{"doc": i, "title": f"T{i}", "source": f"f{i}.txt"} for i in range(1, n + 1)]
    folder = _folder(tmp_path, **{
        "manifest.json": {"task": "q", "documents": docs,
                          "inputs": {"read": [{"doc": i, "source": f"f{i}.txt"} for i in range(1, n + 1)],
                                     "skipped": [{"source": "a.bin"}, {"source": "b.bin"}]},
                          "evidence_stats": {"records": 3, "by_doc": {str(i): {"records": 1} for i in (5, 6, 9)}}},
        "result.json": {"evidence": [{"doc": 9, "id": "D9", "kind": "document", "title": "T9"}]},
        "records.json": {"facts": [{"_doc": 5, "v": 1}, {"_doc": 6, "v": 2}, {"_doc": 8, "v": 3}]},
        "reuse.json": {"documents": {str(i): {"populate": {"reused": False, "why": "new"}} for i in range(1, n + 1)}},
    })
    data = load(folder)
    mentioned = ["1", "2", "3", "5", "6", "9"]  # the first three, the records' (5, 6; 8's record is left out), cited 9
    assert [str(d["doc"]) for d in data["documents"]] == mentioned and data["documents_total"] == n
    assert [str(i["doc"]) for i in data["inputs"]["read"]] == mentioned
    assert data["inputs"]["skipped"] == [{"source": "a.bin"}] and data["inputs_total"] == {"read": n, "skipped": 2}
    assert sorted(data["reuse"], key=int) == mentioned
    assert sorted(data["evidence_stats"]["by_doc"], key=int) == ["5", "6", "9"]
    assert any("10 documents" in p for p in data["problems"])


def test_a_large_runs_files_are_read_a_piece_at_a_time_and_give_the_page_they_gave_parsed_whole(tmp_path, monkeypatch):
    """A large run's manifest, notes, reuse.json and result.json are never parsed whole (at 100,000 documents
    each is hundreds of megabytes as Python objects): what the page keeps is what it kept when they were."""
    from r3con.report import _load

    monkeypatch.setattr(_load, "TEXTS_UP_TO", 3)
    n = 12
    folder = _folder(tmp_path, **{
        "manifest.json": {"task": "q", "documents": [{"doc": i, "title": f"T{i}", "parts": 1} for i in range(1, n + 1)],
                          "inputs": {"read": [{"doc": i, "source": f"f{i}.txt"} for i in range(1, n + 1)]},
                          "evidence_stats": {"records": 2, "by_doc": {"4": {"records": 1}, "11": {"records": 1}}}},
        "result.json": {"documents": n, "evidence": [{"doc": 11, "id": "D11", "kind": "document", "title": "T11"}],
                        "inputs": {"read": [{"doc": i} for i in range(1, n + 1)]}},
        "documents.jsonl": "".join(json.dumps({"doc": i, "title": f"T{i}", "text": f"text {i}"}) + "\n"
                                   for i in range(1, n + 1)),
        "notes/round-1.json": [{"doc": str(i), "note": f"note {i}", "refs": []} for i in range(1, n + 1)],
        "records.json": {"facts": [{"_doc": 4, "v": 1}]},
        "reuse.json": {"documents": {str(i): {"populate": {"reused": True, "why": "same"}} for i in range(1, n + 1)}},
    })
    whole: list[str] = []
    json_of = _load.Folder.json
    monkeypatch.setattr(_load.Folder, "json", lambda self, name, default=None: whole.append(name) or json_of(self, name, default))
    data = load(folder)
    assert not {"manifest.json", "result.json", "reuse.json", "notes/round-1.json"} & set(whole)
    assert [d["doc"] for d in data["documents"]] == [1, 2, 3, 4, 11] and data["documents_total"] == n
    assert data["texts"] == {"11": "text 11"} and list(data["notes"]) == ["1", "2", "3", "11"]
    assert list(data["reuse"]) == ["1", "2", "3", "4", "11"] and data["inputs_total"] == {"read": n}
    assert data["evidence_stats"]["by_doc"] == {"4": {"records": 1}, "11": {"records": 1}}


def test_records_written_a_row_a_line_are_read_as_records_parsed_whole(tmp_path, monkeypatch):
    """The report reads records.json a record at a time in `write_json_rows`'s layout and parses any other
    layout whole (an indented one, an older run's); a large run's page keeps the same records either way."""
    from r3con.artifacts.folder import RunDir
    from r3con.report import _load

    monkeypatch.setattr(_load, "TEXTS_UP_TO", 2)
    monkeypatch.setattr(_load, "RECORDS_UP_TO", 2)
    tables = {"facts": [{"_doc": i, "v": i} for i in range(1, 8)], "none": []}
    manifest = {"task": "q", "documents": [{"doc": i, "title": f"T{i}"} for i in range(1, 8)]}
    result = {"evidence": [{"doc": 6, "id": "D6", "kind": "document", "title": "T6"}]}
    streamed = _folder(tmp_path / "a", **{"manifest.json": manifest, "result.json": result})
    RunDir(streamed).write_json_rows("records.json", tables)
    whole = _folder(tmp_path / "b", **{"manifest.json": manifest, "result.json": result,
                                        "records.json": json.dumps(tables, indent=1)})
    got, expected = load(streamed), load(whole)
    assert got["records"] == expected["records"] == {"facts": [{"_doc": 1, "v": 1}, {"_doc": 2, "v": 2},
                                                                {"_doc": 6, "v": 6}], "none": []}
    assert [p for p in got["problems"] if "records" in p] == [p for p in expected["problems"] if "records" in p] != []
