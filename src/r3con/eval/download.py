"""Fetch a benchmark's official files, for users with internet access.

Loong: `loong.jsonl` from the upstream repository (MozerWang/Loong, `data/loong.jsonl` on its main
branch) and `doc.zip`, the documents of all three domains, from the address upstream's README names
("wget -P data/ http://alibaba-research.oss-cn-beijing.aliyuncs.com/loong/doc.zip").
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, InputError

LOONG_JSONL_URL = "https://raw.githubusercontent.com/MozerWang/Loong/main/data/loong.jsonl"
LOONG_DOC_URL = "http://alibaba-research.oss-cn-beijing.aliyuncs.com/loong/doc.zip"
CORPUSQA_URL = "https://huggingface.co/datasets/Tongyi-Zhiwen/CorpusQA"


class DownloadError(InputError):
    """A benchmark file could not be fetched (offline, moved, or refused)."""


def fetch(url: str, target: Path, *, timeout_s: float = 60.0) -> Path:
    """Download `url` to `target` (through a temporary file, so a broken download leaves nothing behind)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response, partial.open("wb") as fh:
            shutil.copyfileobj(response, fh, length=1 << 20)
    except urllib.error.HTTPError as exc:
        partial.unlink(missing_ok=True)
        raise DownloadError(
            f"cannot download {url} (HTTP {exc.code} {exc.reason}); it may have moved: fetch it by hand into {target.parent}"
        ) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(
            f"cannot download {url} ({reason}); check the internet connection, or fetch it by hand into {target.parent}"
        ) from exc
    partial.replace(target)
    return target


def _extract(archive: Path, to: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                parts = PurePosixPath(name).parts
                if name.startswith("/") or ".." in parts:
                    raise DownloadError(f"{archive} holds an unsafe path {name!r}; not extracting it")
            zf.extractall(to)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{archive} is not a zip file; delete it and download again") from exc


def download_loong(
    to: Path, *, jsonl_url: str = LOONG_JSONL_URL, doc_url: str = LOONG_DOC_URL, timeout_s: float = 60.0
) -> Path:
    """Fetch what `to` lacks of Loong (`loong.jsonl`; `doc/` with all three domains, from doc.zip), ready
    for `--data`; return `to`. A copy without the legal domain's `doc/legal/legal.json` gets doc.zip."""
    to.mkdir(parents=True, exist_ok=True)
    if not (to / "loong.jsonl").is_file():
        fetch(jsonl_url, to / "loong.jsonl", timeout_s=timeout_s)
    doc = to / "doc"
    if (doc / "financial").is_dir() and (doc / "paper").is_dir() and (doc / "legal" / "legal.json").is_file():
        return to
    archive = fetch(doc_url, to / "doc.zip", timeout_s=timeout_s)
    _extract(archive, to)
    archive.unlink()
    if not (to / "doc").is_dir():
        raise DownloadError(f"doc.zip from {doc_url} holds no doc/ folder; look into {to} and arrange it as doc/<domain>/")
    return to


def download(benchmark: str, to: Path, *, timeout_s: float = 60.0) -> Path:
    """Fetch the official files of `benchmark` into `to`."""
    if benchmark == "loong":
        return download_loong(to, timeout_s=timeout_s)
    if benchmark == "corpusqa":
        raise ConfigError(
            f"CorpusQA is not fetched by r3con; download 1m_4domains.jsonl from {CORPUSQA_URL} and pass --data FILE"
        )
    if benchmark == "dracula":
        raise ConfigError("the Dracula corpus ships with the project data (shared/data/dracula); pass --data PATH")
    raise ConfigError(f"unknown benchmark {benchmark!r}; use loong, corpusqa or dracula")
