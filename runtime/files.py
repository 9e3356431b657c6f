"""Files aicfc writes: whole or not at all, never half-written.

Every file aicfc writes (aicfc-opt -o, aicfc-run -o, the autotune cache,
examples' --emit-mlir, checkpoints) goes through `atomic_write`:

    with atomic_write("out.npz", "wb") as f:
        np.savez(f, **arrays)

It writes a temporary file in the target's directory (`.out.npz.<random>.tmp`),
flushes and fsyncs it, renames it over the target with `os.replace` (atomic on
POSIX within one file system) and fsyncs the directory, so that after any
failure (disk full, file-size limit, an exception, Ctrl-C, SIGKILL, a power
cut) the target holds either its previous content or the whole new one. On a
failure the temporary file is removed (except after SIGKILL or a power cut,
where a stray `.<name>.*.tmp` may stay behind; the target is intact).

The new file gets the permissions a normal write would give: an existing
target's mode, else 0o666 less the umask. A symlink is written through (its
target is replaced). A target that is not a regular file (/dev/null,
/dev/full, a FIFO) cannot be renamed over and is written in place, with the
same flush and error checks.

`locked(path)` serialises read-modify-write of a shared file (the autotune
cache) between processes with a `filelock` lock file beside it.

Errors: `WriteError` (an OSError) whose str() is `cannot write 'path': reason`.
This module imports no backend (runtime/ shared layer): the API, the tools and
the runtime use it alike.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal, overload

import filelock


class WriteError(OSError):
    """A file could not be written; str() names the file and the reason."""

    def __init__(self, path: str | os.PathLike[str], reason: str, err: int | None = None):
        super().__init__(err or 0, reason, os.fspath(path))
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot write '{self.filename}': {self.reason}"


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError):
        if e.errno == errno.EFBIG:
            return "File too large (the file-size limit, ulimit -f, was reached)"
        return e.strerror or str(e)
    return str(e) or type(e).__name__


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot fsync a directory; the rename is done
        pass
    finally:
        os.close(fd)


@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["w"] = "w", encoding: str = "utf-8"
) -> contextlib.AbstractContextManager[IO[str]]: ...
@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["wb"], encoding: str = "utf-8"
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
def atomic_write(
    path: str | os.PathLike[str], mode: str = "w", encoding: str = "utf-8"
) -> contextlib.AbstractContextManager[IO[Any]]:
    """A context manager yielding a file object ("w" text, "wb" bytes) that replaces
    `path` atomically when the block ends without an exception (see module docstring).

    Raises WriteError naming `path` for any OSError of creating, writing, syncing or
    renaming; an exception from the block (KeyboardInterrupt included) removes the
    temporary file and propagates unchanged, leaving `path` as it was.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', got {mode!r}")
    return _atomic_write(os.fspath(path), mode, encoding)


@contextlib.contextmanager
def _atomic_write(path: str, mode: str, encoding: str) -> Iterator[IO[Any]]:
    target = os.path.realpath(path)  # write through a symlink, as open(path, "w") does
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise WriteError(path, _reason(e), e.errno) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise WriteError(path, "it is a directory", errno.EISDIR)
    if st is not None and not stat.S_ISREG(st.st_mode):
        with _in_place(path, target, mode, encoding) as device:
            yield device
        return
    folder = os.path.dirname(target) or "."
    try:
        fd, tmp = _create_temporary(folder, os.path.basename(target))
    except OSError as e:
        raise WriteError(path, _reason(e), e.errno) from None
    try:
        try:
            if st is not None:  # keep the old file's mode (and owner), as writing into it would
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.fchown(fd, st.st_uid, st.st_gid)
            f: IO[Any] = os.fdopen(fd, mode, encoding=None if "b" in mode else encoding)
        except BaseException:
            os.close(fd)
            raise
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        _remove(tmp)
        raise WriteError(path, _reason(e), e.errno) from None
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(folder)


@contextlib.contextmanager
def _in_place(path: str, target: str, mode: str, encoding: str) -> Iterator[IO[Any]]:
    """A device or FIFO: written directly (no rename is possible), errors still raised."""
    try:
        out: IO[Any] = open(target, mode, encoding=None if "b" in mode else encoding)  # noqa: SIM115
    except OSError as e:
        raise WriteError(path, _reason(e), e.errno) from None
    try:
        with out:
            yield out
            out.flush()
            with contextlib.suppress(OSError):  # /dev/null and FIFOs cannot fsync
                os.fsync(out.fileno())
    except OSError as e:
        raise WriteError(path, _reason(e), e.errno) from None


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _create_temporary(folder: str, name: str) -> tuple[int, str]:
    """A new file `.<name>.<random>.tmp` in `folder`, opened for writing, mode 0o666 less
    the umask (what open(path, "w") gives a new file; mkstemp would give 0o600)."""
    while True:
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue


_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace `path` atomically by `text` (UTF-8). Raises WriteError."""
    with atomic_write(path, "w") as f:
        f.write(text)


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file that guards `path` (`path` + ".lock", beside it)."""
    p = Path(path)
    return p.with_name(p.name + ".lock")


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], timeout: float = 60.0) -> Iterator[None]:
    """Hold an inter-process lock for read-modify-write of `path` (a lock file beside it).

    Raises WriteError naming `path` when the lock cannot be created or is not
    obtained within `timeout` seconds.
    """
    lock = filelock.FileLock(str(lock_path(path)), timeout=timeout)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise WriteError(path, f"another process holds {lock_path(path)} (waited {timeout} s)")
    except OSError as e:
        raise WriteError(path, f"cannot lock it: {_reason(e)}", e.errno) from None
    try:
        yield
    finally:
        lock.release()
