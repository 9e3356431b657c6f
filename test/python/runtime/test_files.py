"""runtime/files.py: a file aicfc writes is its old content or the whole new one, never half.

Fault injection at the helper: an exception and Ctrl-C inside the write, a full disk
(/dev/full and a write that fails with ENOSPC), the file-size limit (RLIMIT_FSIZE in a
subprocess) and SIGKILL in the middle of a write (a subprocess). In each the previous
file is intact and the error names the file. The tools' use of it is tested in
test/python/tools/test_file_faults.py.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aicfc.runtime import files
from aicfc.runtime.files import WriteError, atomic_write, locked, write_text

OLD = "the previous content\n"


@pytest.fixture
def target(tmp_path: Path) -> Path:
    p = tmp_path / "out.txt"
    p.write_text(OLD)
    return p


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_writes_the_whole_file_and_leaves_no_temporary(target):
    write_text(target, "new\n" * 1000)
    assert target.read_text() == "new\n" * 1000
    assert leftovers(target.parent) == []


def test_bytes_mode(tmp_path):
    with atomic_write(tmp_path / "b.bin", "wb") as f:
        f.write(b"\x00\xff" * 10)
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\xff" * 10


@pytest.mark.parametrize("error", [ValueError("boom"), KeyboardInterrupt()])
def test_an_exception_in_the_block_keeps_the_old_file(target, error):
    with pytest.raises(type(error)), atomic_write(target) as f:
        f.write("half of the new")
        f.flush()
        raise error
    assert target.read_text() == OLD
    assert leftovers(target.parent) == []


def test_a_full_disk_keeps_the_old_file_and_names_it(target, monkeypatch):
    """A write that fails with ENOSPC part way (a patched file object), as on a full disk."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, data):
            self.n += len(data)
            if self.n > 10:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(files.os, "fdopen", lambda *a, **k: Full(real_fdopen(*a, **k)))
    with pytest.raises(WriteError) as info, atomic_write(target) as f:
        f.write("0123456789abcdef")
    assert str(info.value) == f"cannot write '{target}': No space left on device"
    assert target.read_text() == OLD
    assert leftovers(target.parent) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_dev_full_is_an_error_not_a_success():
    with pytest.raises(WriteError) as info, atomic_write("/dev/full") as f:
        f.write("x" * 100_000)
    assert str(info.value) == "cannot write '/dev/full': No space left on device"


def test_a_missing_folder_and_a_directory_are_named(tmp_path):
    with pytest.raises(WriteError, match=r"cannot write '.*/nope/x': No such file or directory"):
        write_text(tmp_path / "nope" / "x", "x")
    with pytest.raises(WriteError, match=r"cannot write '.*': it is a directory"):
        write_text(tmp_path, "x")


def test_permissions_are_those_of_a_normal_write(tmp_path):
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "new.txt", "x")
        with open(tmp_path / "plain.txt", "w") as f:  # what open() gives a new file
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    assert (tmp_path / "new.txt").stat().st_mode == (tmp_path / "plain.txt").stat().st_mode
    existing = tmp_path / "kept.txt"
    existing.write_text(OLD)
    existing.chmod(0o604)
    write_text(existing, "new")
    assert stat.S_IMODE(existing.stat().st_mode) == 0o604  # an existing file keeps its mode


def test_a_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text(OLD)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


CHILD = textwrap.dedent(
    """
    import os, sys, time
    from aicfc.runtime import files
    real_fsync = os.fsync
    def slow_fsync(fd):  # the temporary file is complete but not yet renamed
        print("WRITING", flush=True)
        time.sleep(60)
    files.os.fsync = slow_fsync
    with files.atomic_write(sys.argv[1]) as f:
        f.write("new content " * 10000)
    """
)


def test_sigkill_in_the_middle_of_a_write_keeps_the_old_file(target):
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(target)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "WRITING\n"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        child.kill()
    assert target.read_text() == OLD
    # A killed process cannot clean up: its temporary may stay, named after the target.
    assert all(n.startswith(".out.txt.") for n in leftovers(target.parent))


def test_the_file_size_limit_keeps_the_old_file_and_names_it(target):
    """RLIMIT_FSIZE (ulimit -f) in a subprocess: the write fails with EFBIG (Python ignores
    SIGXFSZ), the message says so, the old file is intact."""
    script = (
        "import sys\nfrom aicfc.runtime.files import write_text, WriteError\n"
        "try:\n    write_text(sys.argv[1], 'x' * 100_000)\n"
        "except WriteError as e:\n    sys.exit(str(e))\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    r = subprocess.run(
        [sys.executable, "-c", script, str(target)],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert r.stderr.strip() == (
        f"cannot write '{target}': File too large (the file-size limit, ulimit -f, was reached)"
    )
    assert target.read_text() == OLD
    assert leftovers(target.parent) == []


def test_locked_makes_another_process_wait_and_names_the_file(tmp_path):
    path = tmp_path / "cache.json"
    script = (
        "import sys\nfrom aicfc.runtime.files import locked, WriteError\n"
        "try:\n    with locked(sys.argv[1], timeout=0.2):\n        pass\n"
        "except WriteError as e:\n    sys.exit(str(e))\n"
    )
    with locked(path):
        held = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True)
    free = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True)
    assert held.returncode == 1
    assert held.stderr.decode().startswith(f"cannot write '{path}': another process holds")
    assert free.returncode == 0, free.stderr
