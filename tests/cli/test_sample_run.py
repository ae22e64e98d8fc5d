"""`r3con run --sample N`: a run on part of the folder, the same part for the same files, and the estimate for
the whole folder printed beside what the sample cost."""

import json
from pathlib import Path

import pytest

from r3con.testing import FakeLLMServer

from ..conftest import cli_in_process

QUESTION = "Who wrote to whom, and from where?"


def letters(folder: Path, prefix: str = "") -> Path:
    folder.mkdir()
    for i in range(10):
        (folder / f"{prefix}{9 - i if prefix else i}.txt").write_text(
            f"Letter {i}\n\nPerson {i} wrote to Person {i + 1} from town number {i} about the harbour.")
    return folder


def sampled_texts(stdout: str) -> set[str]:
    folder = Path(json.loads(stdout)["run_dir"])
    return {d["sha256"] for d in json.loads((folder / "manifest.json").read_text())["documents"]}


def test_a_sample_run_takes_the_same_documents_whatever_their_names_and_prints_the_whole_estimate(tmp_path):
    one, other = letters(tmp_path / "one"), letters(tmp_path / "other", prefix="renamed-")
    with FakeLLMServer() as server:
        first = cli_in_process("run", QUESTION, str(one), "--sample", "3", "--base-url", server.base_url,
                               "--json", "--out", str(tmp_path / "runs"))
        second = cli_in_process("run", QUESTION, str(other), "--sample", "3", "--base-url", server.base_url,
                                "--json", "--out", str(tmp_path / "runs"))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["documents"] == 3
    assert sampled_texts(first.stdout) == sampled_texts(second.stdout), "chosen by content, not by name or order"
    assert "sample: 3 of 10 documents" in first.stderr
    whole = first.stderr.split("the whole folder (10 documents): about ")[1]
    estimated_calls = int(whole.split(" calls")[0].replace(",", ""))
    assert estimated_calls > json.loads(first.stdout)["usage"]["calls"], "the whole folder needs more calls"
    assert "local server" in whole.split("\n\n")[0] or "free" in whole


@pytest.mark.parametrize("spec, taken", [("0.2", 2), ("0.01", 1), ("10", 10)])
def test_a_sample_can_be_a_share_of_the_folder(tmp_path, spec, taken):
    folder = letters(tmp_path / "docs")
    with FakeLLMServer() as server:
        proc = cli_in_process("run", QUESTION, str(folder), "--sample", spec, "--base-url", server.base_url,
                              "--json", "--quiet", "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["documents"] == taken


@pytest.mark.parametrize("spec", ["0", "-1", "1.5", "half"])
def test_a_sample_that_is_no_count_or_share_is_refused(tmp_path, spec):
    folder = letters(tmp_path / "docs")
    proc = cli_in_process("run", QUESTION, str(folder), "--sample", spec, "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "--sample" in proc.stderr


def test_a_sampled_document_keeps_the_number_the_whole_folder_gives_it(tmp_path):
    folder = letters(tmp_path / "docs")
    with FakeLLMServer() as server:
        runs = [cli_in_process("run", QUESTION, str(folder), *extra, "--base-url", server.base_url, "--json", "--quiet",
                               "--out", str(tmp_path / "runs")) for extra in (("--sample", "3"), ())]
    numbers = []
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        manifest = json.loads((Path(json.loads(proc.stdout)["run_dir"]) / "manifest.json").read_text())
        numbers.append({d["sha256"]: d["doc"] for d in manifest["documents"]})
    sampled, whole = numbers
    assert len(sampled) == 3 and all(whole[sha] == number for sha, number in sampled.items())
    assert sorted(sampled.values()) != [1, 2, 3]
