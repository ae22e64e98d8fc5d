"""--option KEY=VALUE: validated against each method's Options, listed by `r3con eval methods`."""

import json

import pytest
from typer.testing import CliRunner

from r3con.cli.eval_cmd import eval_app
from r3con.errors import ConfigError
from r3con.methods import available_methods, configured_methods, method_options
from r3con.testing import FakeLLMServer

from ..eval._fakes import shared_data

runner = CliRunner()


def test_options_are_typed_from_the_dataclass_and_applied():
    assert method_options("rag")["top_k"] == ("int", 16) and method_options("rag")["dense"] == ("bool", True)
    assert method_options("r3con") == {} and len(available_methods()) == 18
    from r3con.baselines import BASELINES

    fns = configured_methods(["rag", "raptor", "arag"], ["rag.top_k=3", "rag.dense=false", "chunk_tokens=200"])
    assert set(fns) == {"rag", "raptor", "arag"} and all(fns[n] is not BASELINES[n] for n in fns)
    assert configured_methods(["rag"], [])["rag"] is BASELINES["rag"]
    assert method_options("longcontext")["truncation"] == ("one of fair|head", "fair")
    assert method_options("structrag")["structures"] == ("comma-separated list", ("table", "graph", "chunks"))
    from r3con.methods import _convert, _option_fields

    assert _convert("structrag", "structures", _option_fields("structrag")["structures"][0], "table, chunks") == ("table", "chunks")
    configured_methods(["longcontext", "structrag"], ["longcontext.truncation=head", "structrag.structures=table,chunks"])


@pytest.mark.parametrize(("names", "values", "message"), [
    (["rag"], ["topk=3"], "--option topk: rag has no such option; valid: chunk_tokens (int, default 512), top_k (int"),
    (["rag"], ["top_k=many"], "--option top_k=many: rag's top_k takes an int value"),
    (["longcontext"], ["truncation=tail"], "longcontext's truncation takes one of fair|head"),
    (["rag"], ["dense=maybe"], "rag's dense takes a bool value"),
    (["rag"], ["top_k"], "--option takes KEY=VALUE (e.g. --option top_k=32), not 'top_k'"),
    (["rag"], ["raptor.top_k=3"], "'raptor' is not among the methods run (rag)"),
    (["rag", "longcontext"], ["top_k=3"], "--option top_k: longcontext has no such option; valid: "),
    (["r3con"], ["top_k=3"], "r3con takes no options"),
    (["rag"], ["top_k=0"], "rag.Options.top_k must be positive, not 0"),
])
def test_invalid_options_are_one_line_errors_that_list_the_valid_ones(names, values, message):
    with pytest.raises(ConfigError) as caught:
        configured_methods(names, values)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_eval_methods_lists_every_method_with_its_options():
    result = runner.invoke(eval_app, ["methods"])
    assert result.exit_code == 0
    for name in ("hipporag", "linearrag", "arag", "fileagent"):
        assert any(line.startswith(name + " ") for line in result.stdout.splitlines()), name
    assert "--option chunk_tokens=1000, link_top_k=5" in result.stdout and "--option max_turns=30" in result.stdout


@pytest.fixture
def loong():
    return shared_data("loong")  # before clean_env clears R3CON_DATA


def test_eval_run_applies_and_refuses_options(loong, tmp_path, clean_env, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = loong
    common = ["run", "--benchmark", "loong", "--data", str(data), "--sets", "1", "--languages", "en", "--limit", "1",
              "--json", "--quiet", "--no-plots", "--method", "rag"]
    with FakeLLMServer() as server:
        bad = runner.invoke(eval_app, [*common, "--base-url", server.base_url, "--out", str(tmp_path / "x"),
                                       "--option", "top=2"])
        assert bad.exit_code != 0 and "error: --option top: rag has no such option; valid: chunk_tokens" in bad.output
        good = runner.invoke(eval_app, [*common, "--base-url", server.base_url, "--out", str(tmp_path / "a"),
                                        "--option", "top_k=2", "-o", "chunk_tokens=300"])
        assert good.exit_code == 0, good.output
    manifest = json.loads(next((tmp_path / "a" / "rag" / "runs").rglob("manifest.json")).read_text())
    assert manifest["options"]["top_k"] == 2 and manifest["options"]["chunk_tokens"] == 300
