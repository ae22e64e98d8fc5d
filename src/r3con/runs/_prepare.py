"""What a run needs before its first call: the question checked, the documents read (through the corpus store),
a sample drawn, or an earlier run's folder, question, documents and settings taken up again (`--resume`).

These are library operations: the CLI, the app and the MCP server call them alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..corpus.documents import Corpus, Document, load_corpus
from ..corpus.inputs import Inputs
from ..corpus.store import CorpusStore, open_store
from ..errors import InputError
from ..pipeline.estimate import sample_documents
from ._resume import (
    carried_inputs,
    check_documents,
    check_question,
    check_settings,
    locate_sources,
    read_resume,
)

__all__ = ["Prepared", "ReadOptions", "prepare", "prepare_resume"]


@dataclass(frozen=True)
class ReadOptions:
    """How files are read: what to leave out (globs), whether hidden files count, the password of PDFs."""

    exclude: tuple[str, ...] = ()
    include_hidden: bool = False
    pdf_password: str | None = None


@dataclass(frozen=True)
class Prepared:
    """A run ready to start: its question, its documents and their account, its settings, and (resumed) the
    folder it continues in. `everything`: with a sample, the documents the sample was drawn from."""

    question: str
    corpus: Corpus
    settings: Settings
    run_folder: Path | None = None
    everything: tuple[Document, ...] = ()
    sampled: bool = False
    store: CorpusStore | None = field(default=None, compare=False)  # open until the run ends (`close`)
    notices: tuple[str, ...] = ()  # lines for the person starting it (documents found at their absolute paths)

    def with_settings(self, settings: Settings) -> Prepared:
        return dataclasses.replace(self, settings=settings)

    def close(self) -> None:
        """Close the corpus store (a run that began closes it when it ends)."""
        if self.store is not None:
            self.store.close()


def _question_given(question: str | None) -> str:
    if question is None or not question.strip():
        raise InputError("the question is empty; pass the question to answer (- reads it from standard input)")
    return question


def prepare(question: str | None, inputs: Sequence[str | Path | Document], settings: Settings | None = None, *,
            read: ReadOptions | None = None, sample: str | None = None) -> Prepared:
    """Check the question and read `inputs` (paths: files, folders, globs; or documents) for a new run;
    with `sample` (a number of documents, or a share: "0.1"), the run takes a sample of them."""
    question = _question_given(question)
    if not inputs:
        raise InputError("no documents given; pass files, folders or globs")
    settings = settings or Settings.resolve()
    store = _open_store(settings) if not _all_documents(inputs) else None
    try:
        corpus = _read(inputs, read or ReadOptions(), store)
        everything = corpus.documents
        if sample is not None:
            corpus = dataclasses.replace(corpus, documents=sample_documents(everything, sample))
    except BaseException:
        if store is not None:
            store.close()
        raise
    return Prepared(question, corpus, settings, everything=everything if sample is not None else (),
                    sampled=sample is not None, store=store)


def prepare_resume(run_dir: Path, *, question: str | None = None, paths: Sequence[str] | None = None,
                   flags: Mapping[str, Any] | None = None, read: ReadOptions | None = None) -> Prepared:
    """The run in `run_dir` (a run folder r3con wrote), ready to continue: its question (`question`, if given,
    must be the same), its documents (read again from where it read them, or from `paths`, and checked to be
    unchanged), its settings with `flags` over them (only those that do not change what it computes)."""
    plan = read_resume(run_dir)
    question = check_question(plan, question)
    notices: list[str] = []
    if not paths:
        paths, moved = locate_sources(plan)
        notices += [moved] if moved else []
    given = {k: v for k, v in (flags or {}).items() if v is not None and v != {}}
    check_settings(plan, given)
    settings = Settings.resolve(**{**plan.settings, **given})
    store = _open_store(settings)
    try:
        numbers = {str(d["source"]): int(d["doc"]) for d in plan.documents if "doc" in d}
        corpus = _read(paths, read or ReadOptions(), store, numbers)
        check_documents(plan, corpus.documents)
    except BaseException:
        if store is not None:
            store.close()
        raise
    corpus = dataclasses.replace(corpus, inputs=carried_inputs(plan, corpus.inputs))
    return Prepared(question, corpus, settings, run_folder=Path(run_dir), store=store, notices=tuple(notices))


def _all_documents(inputs: Sequence[Any]) -> bool:
    given = [isinstance(i, Document) for i in inputs]
    if any(given) and not all(given):
        raise InputError("pass either documents or paths, not both: read the paths with r3con.load_documents first")
    return all(given)


def _open_store(settings: Settings) -> CorpusStore | None:
    return open_store(settings.corpus_store, settings.corpus_dir)


def _read(inputs: Sequence[str | Path | Document], read: ReadOptions, store: CorpusStore | None,
          numbers: Mapping[str, int] | None = None) -> Corpus:
    if _all_documents(inputs):
        docs = tuple(d for d in inputs if isinstance(d, Document))
        return Corpus(docs, Inputs.of(docs))
    return load_corpus([str(p) for p in inputs], exclude=read.exclude, include_hidden=read.include_hidden,
                       pdf_password=read.pdf_password, store=store, numbers=numbers)
