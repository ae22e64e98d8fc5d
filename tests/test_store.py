"""The corpus store over real files and a real SQLite file: what a second load reads again, and what it does not."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time

import pytest

from r3con.corpus import store as store_module
from r3con.corpus.documents import load_corpus, split_documents
from r3con.corpus.store import CorpusStore, text_hash
from r3con.notes.retrieval import BM25
from r3con.notes.selection import terms

from .conftest import cli_in_process

PAST = time.time() - 3600  # an hour ago: older than the store's two-second window for racy files
RACY_S = 0.05  # the racy window in these tests: a file's ctime cannot be set back, only waited out


@pytest.fixture(autouse=True)
def _short_racy_window(monkeypatch):
    """Setting a file's mtime back sets its ctime to now: these tests wait out a 50 ms window, not two seconds."""
    monkeypatch.setattr(store_module, "_RACY_NS", int(RACY_S * 1e9))


def settle(*paths):
    """Date files an hour back, as files written long before the run are (their ctime is now: wait the window out)."""
    for path in paths:
        os.utime(path, (PAST, PAST))
    time.sleep(2 * RACY_S)


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    (docs / "b.md").write_text("# Letter\n\nBob Stone, aged 41, wrote to Ann Lee.")
    (docs / "c.txt").write_text("Census\n\nCara Holm, 29, moved to Bergen.")
    settle(*docs.iterdir())
    return docs


@pytest.fixture
def extracted(monkeypatch):
    """The files the store had a reader extract, by name."""
    names: list[str] = []
    real = store_module.read_document

    def counting(path, **kwargs):
        names.append(path.name)
        return real(path, **kwargs)

    monkeypatch.setattr(store_module, "read_document", counting)
    return names


def test_a_second_load_reads_no_file_and_gives_the_same_documents(tmp_path, folder, extracted, monkeypatch):
    with CorpusStore(tmp_path / "store") as store:
        first = load_corpus([folder], store=store)
        assert first.stored is not None and first.stored.read == 3 and sorted(extracted) == ["a.txt", "b.md", "c.txt"]
        fresh = load_corpus([folder])
        assert first.documents == fresh.documents and first.inputs == fresh.inputs
        extracted.clear()
        monkeypatch.setattr("pathlib.Path.read_bytes", lambda self: pytest.fail(f"{self} was read"))
        second = load_corpus([folder], store=store)
    assert second.documents == first.documents
    assert extracted == []
    assert second.stored.to_dict() == {"unchanged": 3, "touched": 0, "renamed": 0, "read": 0, "reused": 3, "deleted": 0}


def test_only_changed_files_are_read_deleted_ones_drop_out_renamed_ones_are_known(tmp_path, folder, extracted):
    with CorpusStore(tmp_path / "store") as store:
        load_corpus([folder], store=store)
        extracted.clear()
        (folder / "a.txt").write_text("Registry\n\nAnn Lee is 35 years old now.")
        (folder / "b.md").rename(folder / "letter.md")
        (folder / "c.txt").unlink()
        (folder / "d.txt").write_text("Notes\n\nDan Berg, 52, lives in Bergen.")
        settle(*folder.iterdir())
        second = load_corpus([folder], store=store)
    assert sorted(extracted) == ["a.txt", "d.txt"]  # the renamed letter is known by its bytes
    assert second.stored.to_dict() == {"unchanged": 0, "touched": 0, "renamed": 1, "read": 2, "reused": 1, "deleted": 2}
    assert [d.source for d in second.documents] == [str(folder / n) for n in ("a.txt", "d.txt", "letter.md")]
    assert "35 years" in second.documents[0].text
    assert second.documents == load_corpus([folder]).documents


def test_files_named_one_by_one_are_known_without_a_folder_s_query_and_a_reader_not_preloaded_forgets_the_gone(
        tmp_path, folder, extracted):
    files = sorted(folder.iterdir())
    with CorpusStore(tmp_path / "store") as store:
        load_corpus(files, store=store)
        extracted.clear()
        named = load_corpus(files, store=store)  # no folder to preload: each file looked up on its own
        assert extracted == [] and named.stored.unchanged == 3
        (folder / "c.txt").unlink()
        reader = store.reader()  # never preloaded: finish asks the store which paths it knew under the folder
        for path in sorted(folder.iterdir()):
            reader.read(path)
        seen = reader.finish([folder])
        assert (seen.unchanged, seen.deleted) == (2, 1)
        assert load_corpus([folder], store=store).stored.deleted == 0


def test_a_touched_file_is_hashed_not_extracted_and_a_racy_one_is_checked_again(tmp_path, folder, extracted):
    with CorpusStore(tmp_path / "store") as store:
        load_corpus([folder], store=store)
        extracted.clear()
        os.utime(folder / "a.txt")  # now: same bytes, new mtime, within the racy window
        second = load_corpus([folder], store=store)
        third = load_corpus([folder], store=store)  # recorded as racy: hashed again, still not extracted
        settle(folder / "a.txt")
        load_corpus([folder], store=store)
        fourth = load_corpus([folder], store=store)
    assert extracted == []
    assert (second.stored.touched, second.stored.unchanged) == (1, 2)
    assert (third.stored.touched, third.stored.unchanged) == (1, 2)
    assert (fourth.stored.touched, fourth.stored.unchanged) == (0, 3)


def test_a_file_changed_within_the_same_second_is_not_missed(tmp_path, folder):
    path = folder / "a.txt"
    with CorpusStore(tmp_path / "store") as store:
        path.write_text("Registry\n\nversion one")
        load_corpus([folder], store=store)
        stat = path.stat()
        path.write_text("Registry\n\nversion two")  # the same size, inode and (as the worst case) mtime
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        again = load_corpus([folder], store=store)
    assert "version two" in again.documents[0].text


def test_files_without_text_are_remembered_and_errors_are_not(tmp_path, folder, extracted):
    (folder / "blob.txt").write_bytes(b"\x00\x01binary")
    settle(folder / "blob.txt")
    with CorpusStore(tmp_path / "store") as store:
        first = load_corpus([folder], store=store)
        extracted.clear()
        second = load_corpus([folder], store=store)
    assert extracted == []
    assert [s.kind for s in second.inputs.skipped] == [s.kind for s in first.inputs.skipped] == ["binary"]


def test_the_store_is_private_and_a_bad_folder_is_a_one_line_configuration_error(tmp_path):
    with CorpusStore(tmp_path / "store") as store:
        assert store.path.stat().st_mode & 0o077 == 0
    (tmp_path / "file").write_text("")
    with pytest.raises(Exception, match="--corpus-dir DIR or --no-corpus-store"):
        CorpusStore(tmp_path / "file" / "store")


def test_split_through_the_store_gives_the_splitter_s_parts_and_reuses_its_cuts(tmp_path, folder, monkeypatch):
    (folder / "long.txt").write_text("Long\n\n" + "\n\n".join(f"Paragraph {i} names Ann Lee and Oslo." for i in range(80)))
    settle(folder / "long.txt")
    with CorpusStore(tmp_path / "store") as store:
        docs = load_corpus([folder], store=store).documents
        first = store.split(docs, 100)
        monkeypatch.setattr("r3con.corpus.documents.split_text", lambda *a: pytest.fail("split again"))
        second = store.split(docs, 100)
        assert store.spans(text_hash(docs[-1].text), 100) is not None
        assert store.spans(text_hash(docs[-1].text), 99) is None
    monkeypatch.undo()
    expected = split_documents(docs, 100)
    assert first.parts == second.parts == expected
    assert [p.tokens for p in second.parts] == [p.tokens for p in expected]
    assert (first.computed, first.reused, second.computed, second.reused) == (4, 0, 0, 4)
    assert len(second.parts) > 4


def test_bm25_from_stored_term_counts_scores_as_from_the_texts(tmp_path):
    texts = ["Ann Lee lives in Oslo", "Bob Stone wrote to Ann", "Cara moved to Bergen", "Oslo and Bergen"]
    with CorpusStore(tmp_path / "store") as store:
        counts, held = store.term_counts(texts, "notes", terms)
        again, held_again = store.term_counts(texts, "notes", terms)
    assert (held, held_again) == (0, 4)
    index = BM25(texts, tokenize=terms)
    assert BM25.from_counts(again, tokenize=terms).scores("Ann in Oslo") == index.scores("Ann in Oslo")


def test_embeddings_are_kept_per_model_and_text(tmp_path):
    sent: list[list[str]] = []

    async def embed(texts):
        sent.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]

    async def go():
        with CorpusStore(tmp_path / "store") as store:
            stored, seen = store.embedder(embed, "m1")
            first = await stored(["a", "bb", "a"])
            second = await stored(["bb", "ccc"])
            other, _ = store.embedder(embed, "m2")
            await other(["a"])
            return first, second, seen

    first, second, seen = asyncio.run(go())
    assert first == [[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]] and second == [[2.0, 1.0], [3.0, 1.0]]
    assert sent == [["a", "bb"], ["ccc"], ["a"]]
    assert seen.to_dict() == {"reused": 1, "computed": 4}


def test_a_second_question_reads_the_corpus_from_the_store_and_says_so(fake_server, folder, tmp_path):
    def ask(question, *extra):
        proc = cli_in_process("run", question, str(folder), "--json", "--quiet", "--out", str(tmp_path / "runs"),
                              "--corpus-dir", str(tmp_path / "corpus"), *extra,
                              env={"OPENAI_BASE_URL": fake_server.base_url})
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    first = ask("How old are the people named?")
    second = ask("Where do the people live?")
    off = ask("Where do the people live?", "--no-corpus-store")
    assert first["corpus_store"]["files"]["read"] == 3
    assert second["corpus_store"]["files"] == {"unchanged": 3, "touched": 0, "renamed": 0, "read": 0, "reused": 3,
                                               "deleted": 0}
    assert second["corpus_store"]["parts"] == {"documents_reused": 3, "documents_split": 0, "parts": 3}
    assert off["corpus_store"] is None
    manifest = json.loads((tmp_path / "runs" / os.path.basename(second["run_dir"]) / "manifest.json").read_text())
    assert manifest["corpus_store"] == second["corpus_store"]
    assert (tmp_path / "corpus" / "corpus.sqlite").is_file()


def edit_in_place(path, old: str, new: str):
    """Replace `old` by `new` (as long) in the file, then put its mtime back: the size, mtime and inode are as before."""
    stat = path.stat()
    text = path.read_text()
    assert len(old) == len(new) and old in text
    with path.open("r+") as f:  # in place: the same inode
        f.write(text.replace(old, new))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (stat.st_size, stat.st_mtime_ns, stat.st_ino)


def test_an_edit_of_the_same_size_with_its_mtime_put_back_is_seen(tmp_path, folder, extracted):
    with CorpusStore(tmp_path / "store") as store:
        first = load_corpus([folder], store=store)
        assert load_corpus([folder], store=store).stored.unchanged == 3  # recorded as settled, not as racy
        edit_in_place(folder / "a.txt", "34 years", "43 years")
        extracted.clear()
        again = load_corpus([folder], store=store)
    assert extracted == ["a.txt"]
    assert again.stored.to_dict() == {"unchanged": 2, "touched": 0, "renamed": 0, "read": 1, "reused": 2, "deleted": 0}
    assert "43 years" in again.documents[0].text and "34 years" in first.documents[0].text
    assert again.documents[0].sha256 == text_hash(again.documents[0].text) != first.documents[0].sha256
    assert again.documents == load_corpus([folder]).documents


def test_a_file_changed_within_the_racy_window_of_its_ctime_is_hashed_again(tmp_path, folder, extracted, monkeypatch):
    path = folder / "a.txt"
    with CorpusStore(tmp_path / "store") as store:
        os.utime(path, (PAST, PAST))  # an old mtime, but the ctime is now: a write now would change neither
        load_corpus([folder], store=store)
        hashed: list[str] = []
        real = store_module.raw_hash
        monkeypatch.setattr(store_module, "raw_hash", lambda data: hashed.append(data) or real(data))
        second = load_corpus([folder], store=store)
        time.sleep(2 * RACY_S)  # recorded again after the window: settled
        load_corpus([folder], store=store)
        hashed.clear()
        third = load_corpus([folder], store=store)
    assert extracted == ["a.txt", "b.md", "c.txt"]  # once each: a racy file is hashed, not extracted again
    assert (second.stored.touched, second.stored.unchanged) == (1, 2)
    assert (third.stored.touched, third.stored.unchanged) == (0, 3) and hashed == []


def test_a_store_written_before_ctime_was_kept_is_brought_up_to_date_and_hashes_its_files_once(tmp_path, folder):
    (tmp_path / "store").mkdir()
    old = sqlite3.connect(tmp_path / "store" / "corpus.sqlite")
    old.executescript(store_module._SCHEMA.replace(", ctime_ns INTEGER, dev INTEGER", ""))
    old.close()
    with CorpusStore(tmp_path / "store") as store:  # the old table, as an earlier r3con left it
        columns = [row[1] for row in store._all("PRAGMA table_info(files)")]
        assert columns[-2:] == ["ctime_ns", "dev"]
        store._write("INSERT INTO files (path, size, mtime_ns, inode, raw, suffix, recorded) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [(str((folder / "a.txt").resolve()).encode(), (folder / "a.txt").stat().st_size,
                       (folder / "a.txt").stat().st_mtime_ns, (folder / "a.txt").stat().st_ino, "0" * 64, ".txt", 0.0)])
        first = load_corpus([folder], store=store)  # a row without ctime is not trusted: a.txt read
        second = load_corpus([folder], store=store)
    assert "34 years" in first.documents[0].text
    assert (first.stored.read, second.stored.unchanged) == (3, 3)


def test_a_run_over_a_file_edited_in_place_with_its_mtime_put_back_reads_the_new_text(fake_server, folder, tmp_path):
    def ask():
        proc = cli_in_process("run", "How old are the people named?", str(folder), "--json", "--quiet",
                              "--out", str(tmp_path / "runs"), "--corpus-dir", str(tmp_path / "corpus"), "--rounds", "1",
                              env={"OPENAI_BASE_URL": fake_server.base_url})
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        run_dir = tmp_path / "runs" / os.path.basename(out["run_dir"])
        documents = [json.loads(line) for line in (run_dir / "documents.jsonl").read_text().splitlines()]
        return out, documents, (run_dir / "records.json").read_text()

    first, first_docs, first_records = ask()
    edit_in_place(folder / "a.txt", "34 years", "43 years")
    second, second_docs, second_records = ask()
    assert first["corpus_store"]["files"]["read"] == 3
    assert second["corpus_store"]["files"]["read"] == 1  # the edited file, and only it
    assert "34 years" in first_docs[0]["text"] and "43 years" in second_docs[0]["text"]
    assert "34" in first_records and "43" in second_records and "43" not in first_records
