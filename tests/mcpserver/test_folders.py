"""`r3con mcp`'s tools that read run folders (runs, records, passage) and estimate, through an MCP client."""

import json

from .conftest import DEMO, QUESTION, r3con_mcp, structured

TOOLS = {"ask", "estimate", "runs", "records", "passage"}


async def test_the_tools_are_listed_with_schemas_and_descriptions_and_read_a_run_folder(finished_run, fake_server,
                                                                                       tmp_path):
    async with r3con_mcp("--out", str(finished_run.parent), "--base-url", fake_server.base_url, cwd=tmp_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert len(tool.description or "") > 60 and tool.input_schema["type"] == "object"
        assert set(tools["ask"].input_schema["required"]) == {"question", "paths"}
        assert {"answer", "citations", "run_dir"} <= set(tools["ask"].output_schema["properties"])

        (listed,) = structured(await client.call_tool("runs", {}))["runs"]
        assert (listed["run_dir"], listed["question"], listed["status"]) == (str(finished_run), QUESTION, "finished")
        assert listed["cost_usd"] == json.loads((finished_run / "usage.json").read_text())["cost_usd"]

        records = json.loads((finished_run / "records.json").read_text())
        table, rows = next(iter(records.items()))
        got = structured(await client.call_tool("records", {"run": str(finished_run),
                                                            "sql": f'SELECT _id, passage FROM "{table}" ORDER BY _id'}))
        assert got["rows"] == sorted(({"_id": r["_id"], "passage": r["_passage"]} for r in rows), key=lambda r: r["_id"])
        limited = structured(await client.call_tool("records", {"run": str(finished_run), "limit": 1,
                                                                "sql": f'SELECT * FROM "{table}"'}))
        assert len(limited["rows"]) == 1 and limited["truncated"] is (len(rows) > 1)

        record = rows[0]
        shown = structured(await client.call_tool("passage", {"run": str(finished_run), "record": record["_id"]}))
        assert (shown["passage"], shown["title"], shown["document"]) == (record["_passage"], record["_title"], record["_doc"])
        text = next(json.loads(line)["text"] for line in (finished_run / "documents.jsonl").read_text().splitlines()
                    if json.loads(line)["doc"] == record["_doc"])
        start, end = record["_span"]
        assert text[start - len(shown["before"]):start] == shown["before"] and text[end:].startswith(shown["after"])


async def test_a_query_that_would_write_or_read_a_file_is_refused_and_the_server_goes_on(finished_run, tmp_path):
    target = tmp_path / "stolen.csv"
    async with r3con_mcp("--out", str(finished_run.parent), cwd=tmp_path) as client:
        for sql in (f"COPY (SELECT 1) TO '{target}'", "SELECT * FROM read_text('/etc/hostname')",
                    f"ATTACH '{tmp_path / 'x.duckdb'}' AS x"):
            refused = await client.call_tool("records", {"run": str(finished_run), "sql": sql})
            assert refused.is_error, sql
            (line,) = refused.content[0].text.splitlines()
            assert "the query failed:" in line, line  # r3con's line, after the SDK's "Error executing tool records"
        assert not target.exists() and not (tmp_path / "x.duckdb").exists()
        missing = await client.call_tool("passage", {"run": str(finished_run), "record": "R0.0.0"})
        assert missing.is_error and "no record 'R0.0.0'" in missing.content[0].text
        not_a_run = await client.call_tool("records", {"run": str(tmp_path), "sql": "SELECT 1"})
        assert not_a_run.is_error and "is not a run folder" in not_a_run.content[0].text
        assert structured(await client.call_tool("runs", {"limit": 5}))["runs"]  # still serving


async def test_estimate_gives_the_plan_without_a_call(fake_server, tmp_path):
    async with r3con_mcp("--base-url", fake_server.base_url, cwd=tmp_path) as client:
        plan = structured(await client.call_tool("estimate", {"question": QUESTION, "paths": [str(DEMO)]}))
    assert plan["documents"] == len(list(DEMO.iterdir())) and plan["total"]["calls"] > 0
    assert {s["stage"] for s in plan["stages"]} >= {"relevance", "schema", "populate", "reason"}
    assert not [c for c in fake_server.calls() if c.get("stage")], "no chat call was made"
