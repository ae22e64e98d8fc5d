"""What a run is asked (`Job`): the question over the documents with the settings, in its folder, told to whom;
and the corpus store it reads through (`StoreUse`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..artifacts.folder import RunDir
from ..config import Settings
from ..corpus.documents import Document, FilesSeen, split_documents_async, spool
from ..corpus.inputs import Inputs
from ..corpus.places import Parts
from ..corpus.spool import TextSpool
from ..corpus.store import CorpusStore, EmbeddingsSeen, Split
from ..notes.selection import Embed
from .events import Emit
from .memory import give_back

__all__ = ["Job", "StoreUse"]


@dataclass
class StoreUse:
    """The corpus store a run reads through, and what it took from it: files (at load), parts, embeddings."""

    store: CorpusStore | None = None
    files: FilesSeen | None = None
    texts: TextSpool | None = None  # where the documents' and parts' texts are kept while the run reads them
    split_seen: Split | None = None
    embeddings: EmbeddingsSeen | None = None  # counted as the calls go

    async def split(self, docs: tuple[Document, ...], budget: int) -> tuple[Document, ...]:
        """The parts of `docs`: through the store when there is one (cuts and token counts kept by content),
        their texts and the documents' then spooled (`corpus.spool`): read back as the calls need them."""
        if self.store is None:
            parts = await split_documents_async(docs, budget)
        else:
            self.split_seen = self.store.split(docs, budget)
            parts = self.split_seen.parts
        if self.texts is not None:
            spool((*docs, *parts), self.texts)
            give_back()  # the texts' memory, now on disk
        return Parts(parts)  # their places by key made once, for what the run holds per part (`corpus.places`)

    async def resplit(self, docs: tuple[Document, ...], budget: int) -> tuple[Document, ...]:
        """The parts of `docs` for a smaller window learned mid-run (split here, as the store's cuts are for the
        window the run began with), spooled."""
        parts = await split_documents_async(docs, budget)
        if self.texts is not None:
            spool(parts, self.texts)
            give_back()
        return Parts(parts)

    def embedder(self, embed: Embed, model: str | None) -> Embed:
        """`embed`, keeping its vectors in the store when there is one."""
        if self.store is None:
            return embed
        embed, self.embeddings = self.store.embedder(embed, model or "")
        return embed

    def to_dict(self) -> dict[str, Any] | None:
        """What came from the store, for the manifest and `--json`; None without a store."""
        if self.store is None:
            return None
        return {"path": str(self.store.path), "files": self.files.to_dict() if self.files else None,
                "parts": self.split_seen.to_dict() if self.split_seen else None,
                "embeddings": self.embeddings.to_dict() if self.embeddings else None}


@dataclass(frozen=True)
class Job:
    """What a run is asked: the question over the documents with the settings, in its folder, told to `emit`."""

    task: str
    docs: tuple[Document, ...]
    settings: Settings
    run_dir: RunDir
    resumed: bool
    inputs: Inputs | None
    emit: Emit
    store: StoreUse
    wants_plan: bool = False  # someone follows the run: its plan is made for the `started` event
