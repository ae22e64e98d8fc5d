"""fileagent: a Claude-Code-style file agent (Claude Code itself cannot run here): documents as files, tool calls.

The documents are written as text files into the sandbox's scratch folder, and a tool-calling agent
works on them with the tools such coding assistants give: `list_files`, `grep` (a regular expression,
matching lines as path:line:text), `read_file` (a 1-based line range) and `run_python` (a cell in the
isolated sandbox, whose working directory is that folder). The file tools are confined to the folder:
absolute paths, `..` and symlinks that lead out are refused, and the refusal goes back to the model.
At most `max_turns` turns; it answers when it answers without a tool call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..corpus.documents import Document
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ._agent import agent_options, sandbox_for
from ._common import check_options, method_run
from ._toolagent import AgentLimits, Tool, ToolError, run_tool_agent

NAME = "fileagent"
DESCRIPTION = ("a Claude-Code-style file agent: documents as files in the sandbox, tools list/grep/read lines/"
               "run Python through tool calling (max 30 turns)")
STAGE = "fileagent"


@dataclass(frozen=True)
class Options:
    """Parameters of the file-agent baseline.

    max_turns: model turns before the forced final answer.
    max_tokens: output budget of each turn.
    read_lines: most lines one read_file call returns.
    grep_matches: most matching lines one grep call returns.
    observation_chars: most characters of one tool result the model sees.
    """

    max_turns: int = 30
    max_tokens: int = 4096
    read_lines: int = 400
    grep_matches: int = 50
    observation_chars: int = 12_000


def file_name(index: int, doc: Document) -> str:
    """A document's file name: its position and a slug of its title."""
    slug = re.sub(r"[^\w\-]+", "_", doc.title, flags=re.UNICODE).strip("_")[:60] or "document"
    part = f"-part{doc.part}" if doc.parts and doc.parts > 1 else ""
    return f"{index + 1:03d}-{slug}{part}.txt"


def write_files(folder: Path, documents: tuple[Document, ...]) -> list[str]:
    """Each document as a UTF-8 text file in `folder`; the names written."""
    names = []
    for i, doc in enumerate(documents):
        name = file_name(i, doc)
        (folder / name).write_text(doc.text, encoding="utf-8")
        names.append(name)
    return names


class Folder:
    """The file tools' view of one folder; every path is resolved inside it or refused."""

    def __init__(self, root: Path, options: Options):
        self.root = root.resolve()
        self.options = options

    def resolve(self, path: str) -> Path:
        """`path` inside the folder (symlinks followed); ToolError for an absolute path or one leading out."""
        if not path or os.path.isabs(path) or path.startswith("~"):
            raise ToolError(f"{path!r}: use a path relative to the working folder (see list_files)")
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            raise ToolError(f"{path!r} is outside the working folder; only its files can be read")
        return target

    def files(self) -> list[Path]:
        out = []
        for dirpath, _, names in os.walk(self.root):  # symlinked folders are not entered
            for name in names:
                path = Path(dirpath) / name
                if path.resolve().is_relative_to(self.root) and path.resolve().is_file():
                    out.append(path)
        return sorted(out)

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    async def list_files(self) -> str:
        rows = []
        for path in self.files():
            text = path.read_text(encoding="utf-8", errors="replace")
            rows.append(f"{self.relative(path)}\t{text.count(chr(10)) + 1} lines\t{len(text)} chars")
        return "\n".join(rows) or "the folder is empty"

    async def grep(self, pattern: str, path: str = "", ignore_case: bool = True) -> str:
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"the pattern is not a valid regular expression: {exc}") from None
        targets = [self.resolve(path)] if path else self.files()
        hits: list[str] = []
        for target in targets:
            if not target.is_file():
                raise ToolError(f"{path!r} is not a file")
            for number, line in enumerate(target.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{self.relative(target)}:{number}:{line.strip()[:300]}")
                    if len(hits) >= self.options.grep_matches:
                        return "\n".join(hits) + f"\n[first {len(hits)} matches; narrow the pattern for the rest]"
        return "\n".join(hits) or "no match"

    async def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file (see list_files)")
        lines = target.read_text(encoding="utf-8", errors="replace").splitlines()
        last = min(len(lines), end_line or len(lines), start_line + self.options.read_lines - 1)
        if start_line > len(lines):
            raise ToolError(f"{path} has {len(lines)} lines; start_line {start_line} is past its end")
        body = "\n".join(f"{n}\t{lines[n - 1]}" for n in range(start_line, last + 1))
        more = f"\n[lines {start_line}-{last} of {len(lines)}]" if last < len(lines) or start_line > 1 else ""
        return body + more


def file_tools(folder: Folder, run_python: Callable[[str], Awaitable[str]]) -> list[Tool]:
    """The four tools over `folder` (`run_python`: async code -> observation)."""
    string, integer = {"type": "string"}, {"type": "integer", "minimum": 1}
    return [
        Tool("list_files", "List the files of the working folder with their sizes.",
             {"type": "object", "properties": {}, "additionalProperties": False}, folder.list_files),
        Tool("grep", "Search the files (or one file) for a regular expression; matching lines as path:line:text.",
             {"type": "object", "properties": {
                 "pattern": {**string, "description": "a Python regular expression"},
                 "path": {**string, "description": "a file path to search only that file"},
                 "ignore_case": {"type": "boolean"}},
              "required": ["pattern"], "additionalProperties": False}, folder.grep),
        Tool("read_file", "Read lines of a file, numbered (1-based, inclusive range).",
             {"type": "object", "properties": {
                 "path": {**string, "description": "a file path relative to the working folder"},
                 "start_line": integer, "end_line": integer},
              "required": ["path"], "additionalProperties": False}, folder.read_file),
        Tool("run_python", "Run Python in a sandbox whose working directory is the folder; returns what it printed.",
             {"type": "object", "properties": {"code": {**string, "description": "Python source"}},
              "required": ["code"], "additionalProperties": False}, run_python),
    ]


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            sandbox_options = agent_options(mr, options.max_turns, options.max_tokens)
            async with sandbox_for(sandbox_options, {}) as sandbox:
                scratch = sandbox.scratch_dir
                if scratch is None:
                    raise RuntimeError("the sandbox started without a scratch folder")
                names = write_files(scratch, documents)

                async def run_python(code: str) -> str:
                    cell = await sandbox.run(code)
                    return cell.observation() or "(no output)"

                system = render("fileagent_system", files=len(names), total_chars=sum(len(d.text) for d in documents),
                                max_turns=options.max_turns)
                first = render("tool_task", task=task)
                limits = AgentLimits(options.max_turns, options.max_tokens, settings.temperature,
                                     options.observation_chars)
                result = await run_tool_agent(mr.llm, stage=STAGE, system=system, task=first.text,
                                              tools=file_tools(Folder(scratch, options), run_python), limits=limits)
                mr.log.update(isolation=sandbox.isolation.to_dict(), files=len(names), turns=result.turns, steps=[s.to_dict() for s in result.steps])
            return mr.finish(result.answer, capped=result.capped)

    return run
