"""Names the file system allows are shown on one line, and special files are named without being opened."""

import os

import pytest

from r3con.corpus.names import from_name_bytes, name_bytes, shown, special_kind
from r3con.corpus.readers import NotText, decode_text


@pytest.mark.parametrize("raw, expected", [
    (b"plain.txt", "plain.txt"),
    (b"caf\xe9.txt", "caf\\xe9.txt"),
    (b"two\nlines.txt", "two\\x0alines.txt"),
    ("Zoë.md".encode(), "Zoë.md"),
])
def test_shown_names_encode_as_utf8_and_stay_on_one_line(raw, expected):
    text = shown(os.fsdecode(raw))
    assert text == expected
    text.encode("utf-8")
    assert "\n" not in text


@pytest.mark.parametrize("raw", [b"caf\xe9.txt", b"two\nlines.txt", b"/a/\xff\xfe/b.md"])
def test_a_name_shown_escaped_keeps_its_bytes_to_find_the_file_again(raw):
    name = os.fsdecode(raw)
    kept = name_bytes(name)
    assert kept is not None and kept.isascii()
    assert from_name_bytes(kept) == name and os.fsencode(from_name_bytes(kept) or "") == raw


@pytest.mark.parametrize("value", [None, "", 3, "not base64!"])
def test_a_name_needing_no_bytes_has_none_and_bad_bytes_read_as_absent(value):
    assert name_bytes("plain/Zoë.md") is None
    assert from_name_bytes(value) is None


def test_a_fifo_is_named_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "p")
    special = special_kind(tmp_path / "p")
    assert special is not None and special.kind == "named pipe"  # reaching here means nothing blocked on it
    assert special_kind(tmp_path) is None


def test_decoding_tells_wide_text_from_a_stray_nul():
    assert decode_text("Ann is 34.\n".encode("utf-16-le") * 8) == ("Ann is 34.\n" * 8, "utf-16-le", None)
    text, encoding, warning = decode_text(b"Cid is 29. " * 100 + b"\x00")
    assert encoding is None and "\x00" not in text and warning and warning.startswith("1 stray NUL byte dropped")
    with pytest.raises(NotText):
        decode_text(b"\x00\x01\x02\x03" * 50)
