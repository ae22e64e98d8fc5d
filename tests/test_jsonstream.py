"""artifacts.jsonstream: large JSON written and read a piece at a time, the unwanted items dropped as they are read."""

from __future__ import annotations

import io
import json

import pytest

from r3con.artifacts import jsonstream
from r3con.artifacts.jsonstream import json_pieces, read_pruned

VALUE = {"task": "é 中 \"quoted\"", "n": 12345678901234567890, "x": -1.5e-7, "ok": True, "none": None,
         "documents": [{"doc": i, "title": f"t{i}", "tags": [i, {"deep": [None, False]}]} for i in range(40)],
         "inputs": {"read": [{"doc": i} for i in range(30)], "skipped": [{"source": f"s{i}"} for i in range(9)],
                    "empty": []},
         "by_doc": {str(i): {"records": i} for i in range(25)}, "empty": {}, "last": [[], {}, ""]}


@pytest.fixture(params=[3, 7, 1 << 20], ids=["3 characters a read", "7", "a MiB"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(jsonstream, "_CHUNK", request.param)  # values cut at every place a read can end


@pytest.mark.parametrize("indent", [None, 1])
def test_without_rules_it_reads_what_json_reads(chunk, indent):
    text = json.dumps(VALUE, ensure_ascii=False, indent=indent)
    assert read_pruned(io.StringIO(text), []) == VALUE == json.loads(text)
    assert read_pruned(io.StringIO(" [1, 2] "), []) == [1, 2] and read_pruned(io.StringIO("7"), []) == 7


def test_the_items_a_rule_names_are_kept_only_where_it_says(chunk):
    seen: list[object] = []

    def first(limit: int):
        return lambda path, item: seen.append(path) or path[-1] < limit

    rules = [(("documents",), first(3)), (("inputs", "read"), lambda path, item: item["doc"] in (4, 29)),
             (("inputs", "*"), first(2)), (("by_doc",), lambda path, item: path == ("by_doc", "3") or path[1] == "24")]
    got = read_pruned(io.StringIO(json.dumps(VALUE)), rules)
    assert got["documents"] == VALUE["documents"][:3]
    assert got["inputs"] == {"read": [{"doc": 4}, {"doc": 29}], "skipped": VALUE["inputs"]["skipped"][:2], "empty": []}
    assert got["by_doc"] == {"3": {"records": 3}, "24": {"records": 24}}
    assert {k: v for k, v in got.items() if k not in ("documents", "inputs", "by_doc")} == {
        k: v for k, v in VALUE.items() if k not in ("documents", "inputs", "by_doc")}
    assert seen == [("documents", i) for i in range(40)] + [("inputs", "skipped", i) for i in range(9)]
    assert read_pruned(io.StringIO(json.dumps([{"a": 1}, {"a": 2}])), [((), lambda p, item: item["a"] > 1)]) == [{"a": 2}]


@pytest.mark.parametrize("text", ['{"a": [1, 2}', '{"a": 1} x', '{"a" 1}', "", '{"a": [1, 2', '{1: 2}'])
def test_what_is_not_json_is_a_value_error(chunk, text):
    with pytest.raises(ValueError):
        read_pruned(io.StringIO(text), [(("a",), lambda k, v: True)])


def test_the_objects_kept_share_one_string_a_key_as_json_loads_does(chunk):
    got = read_pruned(io.StringIO(json.dumps({"items": [{"doc": 1, "in": {"doc": 3}}, {"doc": 2}]})),
                      [(("items",), lambda path, item: True)])
    (a, inner), (b,) = got["items"][0], got["items"][1]
    assert a is b is next(iter(got["items"][0]["in"])) and inner == "in"


@pytest.mark.parametrize("split", [lambda value, top: True, lambda value, top: top, lambda value, top: False])
def test_json_pieces_write_what_json_dumps_writes_however_they_split(split):
    value = {"a": [1, {"b": [None, "é ✓", 2.5]}, []], "": {}, "n": {"1": [True, {"x": "\"q\""}]}, "k": [[]],
             "ints": {1: "a"}, "gen": "x"}
    assert "".join(json_pieces(value, split)) == json.dumps(value, ensure_ascii=False)
    assert "".join(json_pieces([value, [value]], split)) == json.dumps([value, [value]], ensure_ascii=False)
    assert "".join(json_pieces(iter([1, "two", {"3": 3}]), split)) == '[1, "two", {"3": 3}]'  # made as written
    pieces = list(json_pieces({"rows": list(range(5))}, lambda value, top: True))
    assert len(pieces) > 5, "a list that split picks is written an item at a time"


def test_a_summary_made_as_it_is_written_is_the_json_of_the_summary_made_whole(tmp_path, monkeypatch):
    from r3con.artifacts import folder
    from r3con.artifacts.folder import RunDir, json_text
    from r3con.corpus.inputs import Inputs, ReadInput, SkippedInput
    from r3con.evidence.citations import EvidenceStats

    monkeypatch.setattr(folder, "_STREAM_ITEMS", 6)  # as a run of more than 5,000 documents is written
    inputs = Inputs(read=tuple(ReadInput(doc=10_000 + i, source=f"ä{i}.txt") for i in range(8)),
                    skipped=(SkippedInput("a.bin", "binary: no text", "binary"),))
    records = [{"_doc": 10_000 + i % 5, "_match": "exact" if i % 3 else "none"} for i in range(12)]
    stats = EvidenceStats.of(records)

    def summary(lazy: bool) -> dict:
        return {"answer": "Ann", "inputs": inputs.to_dict(lazy=lazy), "evidence_stats": stats.to_dict(lazy=lazy),
                "few": {"inputs": Inputs(read=inputs.read[:2]).to_dict(lazy=lazy)}}

    whole = json.dumps(summary(False), ensure_ascii=False)
    assert "".join(json_text(summary(True))) == whole
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_json("result.json", summary(True))
    assert json.loads((tmp_path / "run" / "result.json").read_text(encoding="utf-8")) == json.loads(whole)


def test_how_deep_json_nests_is_told_from_its_brackets_outside_strings_without_parsing_it():
    from r3con.artifacts.jsonstream import nests_deeper

    assert not nests_deeper('{"a": [1, {"b": [2]}]}', 4) and nests_deeper('{"a": [1, {"b": [2]}]}', 3)
    brackets = '"[[[[{{{{ \\" ]]]]"'  # brackets and an escaped quote inside a string count for nothing
    assert not nests_deeper(f'[{brackets}, [{brackets}]]', 2) and json.loads(f'[{brackets}, [{brackets}]]')
    assert nests_deeper("[" * 200_000 + "]" * 200_000, 500)  # no recursion: past any parser's depth
    assert not nests_deeper("[" * 500 + "]" * 500, 500) and json.loads("[" * 500 + "]" * 500)
