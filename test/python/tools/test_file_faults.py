"""aicfc-opt -o and aicfc-run -o under faults: the previous file survives, the message names it.

Each test injects one fault into a real run of the tool (a syntax error, the output
being the input, /dev/full, a write that fails with ENOSPC, the file-size limit, SIGKILL
and Ctrl-C in the middle of a save, Ctrl-C during a run and a pipeline) and checks that
the previous output file is intact and loadable, that no temporary file is left where
the tool could clean up, and that the tool said what happened in one line.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from aicfc.runtime import files
from aicfc.tools import aicfc_opt, aicfc_run

ROOT = Path(__file__).resolve().parents[3]
DIGITS = str(ROOT / "examples/digits_train_step.mlir")
SMALL = str(ROOT / "test/passes/aicfc-train-pipeline.mlir")


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A valid aicfc-run output (1 step of a small train step, 2.4 KB) to be overwritten."""
    out = tmp_path / "ckpt.npz"
    assert aicfc_run.main([SMALL, "-o", str(out)]) == 0
    return out


def npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as d:
        return {k: d[k] for k in d.files}


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# --- aicfc-opt -o ----------------------------------------------------------------------


def test_aicfc_opt_output_may_be_the_input(tmp_path, capsys):
    """xDSL's driver opened -o for writing before reading the input: the file became an
    empty module and the exit code was 0."""
    f = tmp_path / "step.mlir"
    f.write_text(Path(SMALL).read_text())
    assert aicfc_opt.main([str(f), "-p", "aicfc-fuse", "-o", str(f)]) == 0
    text = f.read_text()
    assert "graph.gemm_epilogue" in text and "@train_step" in text
    assert leftovers(tmp_path) == []


def test_aicfc_opt_syntax_error_keeps_the_previous_output(tmp_path, capsys):
    out = tmp_path / "out.mlir"
    out.write_text("previous output\n")
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f( {\n")
    assert aicfc_opt.main([str(bad), "-o", str(out)]) == 1
    assert "bad.mlir:1:" in capsys.readouterr().err
    assert out.read_text() == "previous output\n"
    assert leftovers(tmp_path) == []


def test_aicfc_opt_to_dev_full_is_an_error(capsys):
    assert aicfc_opt.main([SMALL, "-o", "/dev/full"]) == 1
    assert capsys.readouterr().err == (
        "aicfc-opt: error: cannot write '/dev/full': No space left on device\n"
    )


# --- aicfc-run -o ----------------------------------------------------------------------


def test_aicfc_run_input_and_output_may_be_one_file(checkpoint, capsys):
    before = npz(checkpoint)
    assert aicfc_run.main([SMALL, "-i", str(checkpoint), "-o", str(checkpoint)]) == 0
    after = npz(checkpoint)
    assert float(after["fc.weight.step"]) == float(before["fc.weight.step"]) + 1 == 2.0
    assert not np.array_equal(after["fc.weight"], before["fc.weight"])


def test_aicfc_run_writes_the_name_it_reports(tmp_path, capsys):
    """`-o ckpt` wrote ckpt.npz (numpy.savez adds the suffix) but said 'wrote ... to ckpt',
    and `-i ckpt` then failed."""
    out = tmp_path / "ckpt"
    assert aicfc_run.main([DIGITS, "-o", str(out)]) == 0
    assert f"wrote 30 arrays to {out}\n" in capsys.readouterr().out
    assert out.is_file() and not (tmp_path / "ckpt.npz").exists()
    assert aicfc_run.main([DIGITS, "-i", str(out), "-o", str(out)]) == 0
    assert float(npz(out)["0.weight.step"]) == 2.0


def test_aicfc_run_reads_a_checkpoint_named_without_its_suffix(checkpoint, tmp_path, capsys):
    np.savez(tmp_path / "state", **npz(checkpoint))  # numpy.savez writes state.npz
    assert aicfc_run.main([SMALL, "-i", str(tmp_path / "state")]) == 0
    assert "step 1: loss" in capsys.readouterr().out


def test_aicfc_run_to_dev_full_is_an_error(capsys):
    """It printed 'wrote 30 arrays to /dev/full' and exited 0."""
    assert aicfc_run.main([DIGITS, "-o", "/dev/full"]) == 1
    out, err = capsys.readouterr()
    assert "wrote" not in out
    assert err.endswith("aicfc-run: error: cannot write '/dev/full': No space left on device\n")


def test_aicfc_run_full_disk_keeps_the_previous_checkpoint(checkpoint, monkeypatch, capsys):
    before = npz(checkpoint)
    real_fdopen = os.fdopen

    def full(*args, **kwargs):
        f = real_fdopen(*args, **kwargs)

        def write(data, _written=[0]):  # noqa: B006  # a counter shared by the calls
            _written[0] += len(data)
            if _written[0] > 500:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return type(f).write(f, data)

        f.write = write
        return f

    monkeypatch.setattr(files.os, "fdopen", full)
    assert aicfc_run.main([SMALL, "-o", str(checkpoint), "--steps", "2"]) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"aicfc-run: error: cannot write '{checkpoint}': No space left on device\n")
    assert same(npz(checkpoint), before)
    assert leftovers(checkpoint.parent) == []


def test_aicfc_run_file_size_limit_keeps_the_previous_checkpoint(checkpoint):
    before = npz(checkpoint)

    def limit() -> None:  # the checkpoint is 2.4 KB
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    r = subprocess.run(
        [sys.executable, "-m", "aicfc.tools.aicfc_run", SMALL, "-o", str(checkpoint)],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"aicfc-run: error: cannot write '{checkpoint}': File too large "
        "(the file-size limit, ulimit -f, was reached)"
    )
    assert "Traceback" not in r.stderr
    assert same(npz(checkpoint), before)
    assert leftovers(checkpoint.parent) == []


SLOW_SAVE = textwrap.dedent(
    """
    import os, sys, time
    from aicfc.runtime import files
    def slow_fsync(fd):  # the new checkpoint is in its temporary file, not yet renamed
        print("SAVING", file=sys.stderr, flush=True)
        time.sleep(60)
    files.os.fsync = slow_fsync
    from aicfc.tools.aicfc_run import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _until(child: subprocess.Popen[str], marker: str) -> list[str]:
    """Lines of the child's stderr up to and including the one that starts with `marker`."""
    assert child.stderr is not None
    lines = []
    for line in child.stderr:
        lines.append(line)
        if line.startswith(marker):
            return lines
    raise AssertionError(f"the child ended before {marker!r}: {''.join(lines)}")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_aicfc_run_killed_or_interrupted_while_saving_keeps_the_checkpoint(checkpoint, sig):
    before = npz(checkpoint)
    child = subprocess.Popen(
        [sys.executable, "-c", SLOW_SAVE, SMALL, "-i", str(checkpoint), "-o", str(checkpoint)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _until(child, "SAVING")
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert same(npz(checkpoint), before)
    if sig == signal.SIGINT:
        assert child.returncode == 130
        assert err == "aicfc-run: interrupted\n"
        assert leftovers(checkpoint.parent) == []
    else:
        assert child.returncode == -signal.SIGKILL


def test_aicfc_run_interrupted_during_the_steps_writes_nothing(tmp_path):
    out = tmp_path / "out.npz"
    many = ["--steps", "1000000", "--print-every", "1000000"]
    child = subprocess.Popen(
        [sys.executable, "-m", "aicfc.tools.aicfc_run", SMALL, *many, "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().startswith("step 1: loss")  # busy stepping
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130
    assert err.splitlines()[-1] == "aicfc-run: interrupted" and "Traceback" not in err
    assert not out.exists() and leftovers(tmp_path) == []


SLOW_PIPELINE = textwrap.dedent(
    """
    import sys, time
    from aicfc.tools import aicfc_opt
    def slow(self, prog):  # busy in the pipeline
        print("PIPELINE", file=sys.stderr, flush=True)
        time.sleep(60)
    aicfc_opt.AicfcOptMain.apply_passes = slow
    sys.exit(aicfc_opt.main(sys.argv[1:]))
    """
)


def test_aicfc_opt_interrupted_in_the_pipeline_keeps_the_output(tmp_path):
    out = tmp_path / "out.mlir"
    out.write_text("previous output\n")
    child = subprocess.Popen(
        [sys.executable, "-c", SLOW_PIPELINE, SMALL, "-p", "aicfc-train-pipeline", "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _until(child, "PIPELINE")
        child.send_signal(signal.SIGINT)
        stdout, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130
    assert err == "aicfc-opt: interrupted\n" and stdout == ""
    assert out.read_text() == "previous output\n" and leftovers(tmp_path) == []
