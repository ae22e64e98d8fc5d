"""`r3con run` end to end on the real corpora in ../shared/data (Loong: or its committed slice), against
`r3con fake-llm` in its own process."""

import json
import subprocess
import sys

import pytest

from .conftest import r3con_cli


@pytest.fixture
def fake_llm_process():
    proc = subprocess.Popen([sys.executable, "-m", "r3con", "fake-llm", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().strip().split("=")[1])
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_dracula_46_documents(shared_data, fake_llm_process, tmp_path):
    question = json.loads((shared_data / "dracula" / "questions.json").read_text())[0]["question"]
    proc = r3con_cli("run", question, str(shared_data / "dracula" / "docs"), "--base-url", fake_llm_process,
                     "--json", "--quiet", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["documents"] == 46 and data["degraded"] == [] and data["answer"]
    manifest = json.loads((tmp_path / next(tmp_path.iterdir()).name / "manifest.json").read_text())
    titles = [d["title"] for d in manifest["documents"]]
    assert titles[9] == "Log of the “Demeter”" or "Demeter" in titles[9]
    # the two longest journals do not fit a 32k window with room for notes: they were split into parts
    assert manifest["documents"][0]["parts"] > 1 and manifest["documents"][4]["parts"] > 1
    calls = data["usage"]["by_stage"]
    parts = sum(d["parts"] for d in manifest["documents"])
    assert calls["relevance"]["calls"] == 2 * parts and calls["populate"]["calls"] == parts


def _loong_tasks(root, kind, count):
    rows = [json.loads(line) for line in (root / "loong" / "loong.jsonl").read_text().splitlines()]
    return [r for r in rows if r["type"] == kind and r["set"] == 2][:count]


@pytest.mark.parametrize("kind", ["paper", "financial"])
def test_loong_tasks(benchmark_root, fake_llm_process, tmp_path, kind):
    root = benchmark_root / "loong" / "doc"
    tasks = _loong_tasks(benchmark_root, kind, 1)
    assert tasks
    for task in tasks:
        if kind == "paper":
            paths = [str(root / "paper" / name) for name in task["doc"]]
        else:
            paths = [str(p) for name in task["doc"] for p in sorted((root / "financial").glob(f"*2024-{name}*.txt"))]
        question = f"{task['instruction']}\n\n{task['question']}"
        proc = r3con_cli("run", question, *paths, "--base-url", fake_llm_process, "--json", "--quiet",
                         "--out", str(tmp_path))
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["documents"] == len(set(paths)), "a file named twice is read once"
        assert data["answer"]
