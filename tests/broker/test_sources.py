"""Reading Lean sources from disk (regular files only, bounded), their text hash and header imports."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import patch

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_broker import BrokerError
from beam_broker import _documents as documents
from beam_broker import errors as codes
from beam_broker._documents import header_imports, header_text, read_source, text_hash
from beam_broker.errors import lean_errors

pytestmark = pytest.mark.anyio


def test_header_imports_skip_comments_and_stop_at_the_first_command() -> None:
    text = "/- doc\n comment -/\nprelude\n-- note\nimport A.B C\nimport A.B\n\ndef x := 1\nimport Z\n"
    assert header_imports(text) == ("A.B", "C")
    assert header_imports("module\npublic import D\nimport all E\n") == ("D", "E")
    assert header_imports("/- one line -/\nimport F\n") == ("F",)


@pytest.mark.parametrize(
    ("text", "imports"),
    [
        ("prelude\n/- why -/ import A\n", ("A",)),  # Lean reads the import after the comment
        ("/- a\n b -/ import A\n", ("A",)),
        ("import A -- why\nimport B\n", ("A", "B")),
        ("module\nmeta import A\npublic meta import B\nimport all C\n", ("A", "B", "C")),
        ("/- /- nested -/\nimport A\n-/\nimport B\n", ("B",)),  # still in the outer comment
        ("prelude import A\n", ("A",)),
        ("prelude\nimport\n  A.B\nimport C\n", ("A.B", "C")),  # the name on the next line (Lean 4.35 `--deps`)
        ("import all\n  A\n", ("A",)),
        ("import /- why -/\n -- note\n  A\ndef x := 1\n", ("A",)),
    ],
)
def test_header_imports_are_the_ones_lean_reads(text: str, imports: tuple[str, ...]) -> None:
    """A missed import is a module freshness never checks: an edit to it read clean."""
    assert header_imports(text) == imports


def test_the_header_text_is_everything_before_the_first_command() -> None:
    text = "/- doc -/\nprelude\nimport A\n\n-- note\ntheorem x : True := trivial\nimport Z\n"
    assert header_text(text) == "/- doc -/\nprelude\nimport A\n\n-- note\n"
    assert header_text("import A\n") == "import A\n" and header_text("") == ""
    assert header_text("prelude\nimport\n  A\ndef x := 1\n") == "prelude\nimport\n  A\n"


def test_text_hash_ignores_line_ending_style() -> None:
    assert text_hash("a\r\nb\n") == text_hash("a\nb\n") != text_hash("a\nc\n")
    assert len(text_hash("")) == 16


async def test_reading_a_source_reports_what_is_wrong_with_it(tmp_path: Path) -> None:
    (tmp_path / "A.lean").write_text("ok\n")
    (tmp_path / "Bad.lean").write_bytes(b"\xff")
    (tmp_path / "Dir.lean").mkdir()
    (tmp_path / "Locked.lean").write_text("x")
    (tmp_path / "Locked.lean").chmod(0)
    assert await read_source(tmp_path / "A.lean") == "ok\n"
    for name, needle, reason in [
        ("Missing.lean", "file not found", "fileNotFound"),
        ("Bad.lean", "not UTF-8", "notUtf8"),
        ("Dir.lean", "not a regular file", "notRegularFile"),
        ("x" * 300 + ".lean", "File name too long", "badPath"),  # found by the tool-argument fuzz
        ("A.lean/B.lean", "Not a directory", "badPath"),
    ]:
        with pytest.raises(BrokerError) as info:
            await read_source(tmp_path / name)
        assert info.value.code == codes.INVALID_PARAMS and needle in info.value.message
        assert info.value.data is not None and info.value.data["reason"] == reason
    if os_can_lock_out(tmp_path / "Locked.lean"):
        with pytest.raises(BrokerError) as locked:
            await read_source(tmp_path / "Locked.lean")
        assert locked.value.code == codes.INVALID_PARAMS and "cannot read" in locked.value.message
        assert locked.value.data is not None and locked.value.data["reason"] == "permissionDenied"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path (a unix socket's path is limited to about 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="beam-src-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_only_regular_files_are_read_a_fifo_device_socket_or_directory_is_refused_unread(
    short_dir: Path,
) -> None:
    # Finding 2: a FIFO blocked a worker thread forever, /dev/zero was read until memory ran out.
    os.mkfifo(short_dir / "Fifo.lean")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(short_dir / "Sock.lean"))
    (short_dir / "Dir.lean").mkdir()
    cases = [
        (short_dir / "Fifo.lean", "fifo", "a FIFO (named pipe)"),
        (Path("/dev/zero"), "characterDevice", "a character device"),
        (short_dir / "Sock.lean", "socket", "a socket"),
        (short_dir / "Dir.lean", "directory", "a directory"),
    ]
    try:
        for path, kind, what in cases:
            with anyio.fail_after(5), pytest.raises(BrokerError) as info:
                await read_source(path)
            assert info.value.code == codes.INVALID_PARAMS
            assert info.value.message.startswith(f"not a regular file: {path} is {what}")
            assert info.value.data == {"reason": "notRegularFile", "kind": kind, "path": str(path)}
    finally:
        listener.close()


async def test_a_source_over_the_size_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    (tmp_path / "Big.lean").write_text("x" * 101)
    (tmp_path / "Fits.lean").write_text("x" * 100)
    assert await read_source(tmp_path / "Fits.lean", limit=100) == "x" * 100
    with pytest.raises(BrokerError) as big:
        await read_source(tmp_path / "Big.lean", limit=100)
    assert big.value.code == codes.INVALID_PARAMS and "size limit of 100 bytes" in big.value.message
    assert big.value.data == {"reason": "sourceTooLarge", "limitBytes": 100, "path": str(tmp_path / "Big.lean")}
    (tmp_path / "Huge.lean").write_bytes(b"")
    os.truncate(tmp_path / "Huge.lean", 16 * 2**20 + 1)  # sparse: no 16 MiB written
    with pytest.raises(BrokerError) as huge:
        await read_source(tmp_path / "Huge.lean")
    assert "over Beam's source size limit of 16 MiB (16777216 bytes" in huge.value.message


async def test_the_limit_holds_while_reading_a_file_whose_size_is_not_known_in_advance() -> None:
    # /proc files report size 0 and then have content: the limit is enforced on the bytes read, too.
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("no /proc")
    with pytest.raises(BrokerError) as info:
        await read_source(maps, limit=64)
    assert info.value.data is not None and info.value.data["reason"] == "sourceTooLarge"


async def test_a_file_that_would_block_is_refused_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "A.lean").write_text("x")

    def would_block(fd: int, n: int) -> bytes:
        raise BlockingIOError(errno.EAGAIN, "would block")

    monkeypatch.setattr(os, "read", would_block)
    with pytest.raises(BrokerError) as info:
        await read_source(tmp_path / "A.lean")
    assert info.value.data is not None and info.value.data["kind"] == "other"


async def test_a_failing_read_is_left_to_the_error_boundary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "A.lean").write_text("x")

    def broken(fd: int, n: int) -> bytes:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "read", broken)
    with pytest.raises(OSError, match="I/O error") as info:  # the disk, not the caller's path
        await read_source(tmp_path / "A.lean")
    with pytest.raises(BrokerError) as mapped, lean_errors():
        raise info.value
    assert mapped.value.code == codes.INTERNAL_ERROR and "I/O error" in mapped.value.message


def os_can_lock_out(path: Path) -> bool:
    """Whether a mode-0 file is unreadable here (root reads anything)."""
    try:
        path.read_bytes()
    except PermissionError:
        return True
    return False


async def test_an_open_that_fails_is_left_to_the_boundary_or_names_what_cannot_be_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = iter([OSError(errno.EIO, "Input/output error"), OSError(errno.ENXIO, "No such device")])

    def failing_open(path: object, flags: int) -> int:
        raise next(failures)

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(OSError, match="Input/output error"):  # the disk, not the caller's path
        await read_source(tmp_path / "A.lean")
    with pytest.raises(BrokerError) as gone:  # no such device, and nothing left to stat: kind unknown
        await read_source(tmp_path / "Gone.lean")
    assert gone.value.data is not None and (gone.value.data["reason"], gone.value.data["kind"]) == (
        "notRegularFile",
        "other",
    )


def _header_of_whole_text(text: str) -> tuple[tuple[str, ...], int]:
    """The header rule applied to the whole text at once (what `_header` must agree with).

    Comments (nested block comments, line comments) are blanked out of the whole text first, every line break kept,
    so its lines start where the text's do; then each line's words decide.
    """
    breaks = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what `str.splitlines` breaks at
    code: list[str] = []
    depth, i = 0, 0
    while i < len(text):
        if text.startswith("/-", i):
            depth, i = depth + 1, i + 2
            code.append("  ")
        elif depth and text.startswith("-/", i):
            depth, i = depth - 1, i + 2
            code.append("  ")
        elif not depth and text.startswith("--", i):
            while i < len(text) and text[i] not in breaks:
                code.append(" ")
                i += 1
        else:
            code.append(text[i] if not depth or text[i] in breaks else " ")
            i += 1
    out: list[str] = []
    offset = 0
    for line in "".join(code).splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        words = line.split()
        while words and words[0] in ("prelude", "module"):
            words = words[1:]
        if not words:
            continue
        if words[0] == "public":
            words = words[1:]
        if words[:1] == ["meta"]:
            words = words[1:]
        if words[:1] != ["import"]:
            return tuple(out), start
        out += [name for name in words[1:] if name not in ("all", "import", "public", "meta") and name not in out]
    return tuple(out), len(text)


PIECES = [
    "import A\n", "import B.C D\r\n", "/- c\n", "x -/\n", "-- c\n", "\n", "prelude\n", "def x := 1\n", "\r",
    "\u2028", "public import E\n", "   \n", "/- one -/\n", "import all F\n", "theorem t : True := trivial\n",
    "/- c -/ import G\n", "import H -- c\n", "meta import I\n", "public meta import J\n", "-/ import K\n",
]  # fmt: skip


@settings(max_examples=500)
@given(st.lists(st.sampled_from(PIECES), max_size=14), st.integers(min_value=1, max_value=12))
def test_the_header_is_found_reading_only_the_beginning_of_a_text(pieces: list[str], chunk: int) -> None:
    text = "".join(pieces)
    with patch.object(documents, "_HEAD_CHUNK", chunk):  # the text in chunks that cut lines anywhere
        assert documents._header(text) == _header_of_whole_text(text)
