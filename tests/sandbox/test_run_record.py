"""The run's records say which sandbox layers were in force: the manifest and the transcript."""

from __future__ import annotations

import json

import r3con
from r3con.pipeline.method import run
from r3con.sandbox._results import LAYERS

TEXTS = [("Registry", "Ann Lee is 34 years old."), ("Letter", "Bob Stone, aged 41, wrote to Ann Lee.")]


async def test_manifest_and_transcript_carry_the_isolation_report(fake_server, tmp_path, clean_env):
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path, rounds=1)
    result = await run("How old is Ann Lee?", r3con.documents_from_texts(TEXTS), settings)
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    transcript = json.loads((result.run_dir / "transcript.json").read_text())
    record = manifest["sandbox"]
    assert record["mode"] == "best"
    assert list(record["layers"]) == list(LAYERS)
    assert record["missing"] == [name for name, state in record["layers"].items() if state != "on"]
    assert transcript["isolation"] == {"layers": record["layers"], "missing": record["missing"]}
    assert list((result.run_dir / "sandbox").iterdir()) == []  # the scratch dir went with the sandbox
