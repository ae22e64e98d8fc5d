"""The docs cannot go stale: every `--flag` they name exists, their offline `r3con` examples run, every page is
linked. README.md and docs/*.md are read as a user reads them.

Flags are told apart by where they stand: on an `r3con ...` command line (in a code block, or inline in
backticks) a flag must be an option of that very command; on another program's command line
(`llama-server -c 32768`, `python bench/bench_cut.py --sizes ...`) it is that program's; in prose, a
flag must be one of r3con's options or one of `FOREIGN`, which names the tool each belongs to.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from .conftest import cli_in_process

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FLAG = re.compile(r"(?<![\w/.-])--[a-z][a-z0-9-]*")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")

# other tools' flags that the docs name in prose, with the tool they belong to
FOREIGN = {
    "--enable-auto-tool-choice": "vllm serve",
    "--enable-prompt-tokens-details": "vllm serve",
    "--jinja": "llama-server",
    "--policy": "vllm-router",
    "--router-mode": "vllm-router",
    "--worker-urls": "vllm-router",
    "--assignment-mode": "vllm-router",
    "--router-session-affinity-ttl-secs": "sglang router",
    "--prometheus-port": "vllm-router",
    "--port": "llama-server, vllm serve, r3con fake-llm",
    "--help": "every r3con command (click's own)",
    "--dracula": "bench/bench_reuse.py",
    "--head": "ray start",
    "--dist": "pytest-xdist (dev.py test)",
}


def _commands():
    import typer

    from r3con.cli.app import app

    return typer.main.get_command(app)


def _options(command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")} | {"--help"}


def all_options() -> set[str]:
    found: set[str] = set()
    stack = [_commands()]
    while stack:
        command = stack.pop()
        found |= _options(command)
        stack.extend(getattr(command, "commands", {}).values())
    return found


def r3con_lines(text: str) -> list[str]:
    """The `r3con ...` command lines of a page: in code blocks (continued lines joined) and in inline code."""
    lines = []
    for block in FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines()[1:-1]:
            words = line.strip().removeprefix("$ ").split()
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):  # VAR=value r3con ...
                words = words[1:]
            if words[:1] == ["r3con"]:
                lines.append(" ".join(words))
    for span in INLINE.findall(FENCE.sub("", text)):
        if span.startswith("r3con "):
            lines.append(span)
    return lines


def command_of(line: str):
    """The click command an `r3con ...` line runs, and the line's flags (a trailing # comment's too: they name
    the same command's options)."""
    command = _commands()
    for word in line.replace("#", " ").split()[1:]:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command = sub
    return command, set(FLAG.findall(line))


def prose(text: str) -> str:
    """A page without its code blocks' command lines of other programs (their flags are theirs)."""
    def keep(block: re.Match[str]) -> str:
        kept = [line for line in re.sub(r"\\\n\s*", " ", block.group(0)).splitlines()
                if line.strip().removeprefix("$ ").split()[:1] in ([], ["r3con"]) or line.lstrip().startswith("#")]
        return "\n".join(kept)
    def inline(span: re.Match[str]) -> str:  # `python bench/x.py --seed N`, `bench_scale.py --sizes 200`: theirs
        first = span.group(1).split()[0]
        return "" if first != "r3con" and not first.startswith("-") and re.match(r"[\w./-]+$", first) \
            and FLAG.search(span.group(1)) else span.group(0)
    return INLINE.sub(inline, FENCE.sub(keep, text))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_flag_on_an_r3con_command_line_is_an_option_of_that_command(page):
    wrong = []
    for line in r3con_lines(page.read_text()):
        command, flags = command_of(line)
        wrong += [f"{flag} in `{line[:90]}`" for flag in sorted(flags - _options(command))]
    assert not wrong, f"{page.name} names options its r3con commands do not have: {wrong}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_flag_named_in_prose_is_r3cons_or_a_named_tools(page):
    known = all_options() | set(FOREIGN)
    unknown = sorted(set(FLAG.findall(prose(page.read_text()))) - known)
    assert not unknown, (f"{page.name} names flags no r3con command has: {unknown}; fix the page, or add a flag of "
                         "another tool to FOREIGN with the tool's name")


def test_the_foreign_list_holds_only_flags_r3con_does_not_have_itself():
    shared = {"--help", "--port"}  # r3con's too (fake-llm --port), and other tools'
    assert not (all_options() - shared) & set(FOREIGN), "a flag r3con has needs no entry in FOREIGN"


def test_every_page_in_docs_is_linked_from_the_readme_or_another_page():
    links = {}
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", page.read_text()):
            resolved = (page.parent / target).resolve()
            if resolved != page.resolve():
                links.setdefault(resolved, set()).add(page.name)
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in links]
    assert not orphans, f"pages no other page links to: {orphans}"


def test_every_relative_link_in_the_docs_points_at_a_file():
    broken = [f"{page.name}: {target}" for page in PAGES
              for target in re.findall(r"\]\(((?!https?:|mailto:|#)[^)#\s]+)", page.read_text())
              if not (page.parent / target).exists()]
    assert not broken, broken


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """The bundled demo's run folder, made once: what the docs' offline examples are run against."""
    out = tmp_path_factory.mktemp("demo")
    proc = cli_in_process("demo", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


OFFLINE = {"sql", "show", "demo"}  # the commands that need no server and no documents of the user's


def offline_examples() -> list[tuple[str, str]]:
    """`r3con demo`, and `r3con sql`/`show` on a run folder (RUN_DIR or r3con-runs/...), with a real query."""
    return [(page.name, line) for page in PAGES for line in r3con_lines(page.read_text())
            if line.split()[1:2] and line.split()[1] in OFFLINE
            and (line.split()[1] == "demo" or ("RUN_DIR" in line or "r3con-runs/" in line) and "..." not in line
                 .replace("r3con-runs/20261204-...-", ""))]


def test_the_docs_have_offline_examples_to_run():
    assert {line.split()[1] for _, line in offline_examples()} >= {"sql", "show"}


@pytest.mark.parametrize("page, line", offline_examples(), ids=lambda v: v[:60])
def test_the_docs_offline_r3con_examples_run(page, line, demo_run, tmp_path):
    command = line.split("#")[0] if not line.startswith("r3con sql") else _without_comment(line)
    words = shlex.split(command)[1:]
    words = [str(demo_run) if w == "RUN_DIR" or w.startswith("r3con-runs/") else w for w in words]
    words = [w for w in words if w != "--open"]  # no browser in a test
    if words[0] == "demo":
        words += ["--out", str(tmp_path), "--quiet"]
    proc = cli_in_process(*words)
    assert proc.returncode == 0, f"{page}: `{line}` failed: {proc.stderr[-500:]}"
    if words[0] == "sql":
        assert proc.stdout.strip() and "0 rows" not in proc.stdout, f"{page}: `{line}` found no records"


def _without_comment(line: str) -> str:
    """An `r3con sql` line without its trailing `# ...` comment (the query is quoted, so split on the last quote)."""
    head, quote, tail = line.rpartition('"')
    return head + quote + tail.split("#")[0]


def test_every_count_the_usage_line_can_show_is_explained_in_usage_md():
    from r3con.llm.types import EVENTS

    table = (ROOT / "docs" / "usage.md").read_text().split("### The usage line")[1].split("\n\n|")[1]
    explained = set(re.findall(r"^\| `([a-z_]+) N`", "|" + table, re.MULTILINE))
    assert set(EVENTS) | {"near_window"} <= explained


GUIDES = {"openai.md": "gpt-4o-mini", "openrouter.md": "openai/gpt-4o-mini", "anthropic.md": "claude-haiku-4-5"}


@pytest.mark.parametrize("guide, model", GUIDES.items())
def test_each_providers_guide_runs_as_written_against_the_scripted_server(guide, model, tmp_path):
    """The guide's `r3con run` line, its base URL pointed at the scripted server serving the guide's model: the
    run finishes and costs that model's price (genai-prices), without a --prices file."""
    from r3con.testing import FakeLLMServer

    (line,) = [line for line in r3con_lines((ROOT / "docs" / guide).read_text()) if line.startswith("r3con run ")]
    folder = tmp_path / "filings"
    folder.mkdir()
    (folder / "a.txt").write_text("Recall notice\n\nNordwerk GmbH recalled brake pads in March 2025.")
    (folder / "b.txt").write_text("Supplier list\n\nNordwerk GmbH and Halvard Steel supply the Rotterdam plant.")
    with FakeLLMServer(model=model) as server:
        words = shlex.split(line)[1:]
        words[words.index("--base-url") + 1] = server.base_url
        words = [str(folder) if w == "./filings/" else w for w in words]
        proc = cli_in_process(*words, "--out", str(tmp_path / "runs"), "--json", "--quiet",
                              env={"OPENAI_API_KEY": "sk-test"})
    assert proc.returncode == 0, proc.stderr
    import json

    from r3con.llm.pricing import PriceTable
    from r3con.llm.types import Usage

    usage = json.loads(proc.stdout)["usage"]
    expected = PriceTable.load().cost(model, Usage.from_dict(usage))
    assert expected and usage["cost_usd"] == pytest.approx(expected, rel=1e-3)
