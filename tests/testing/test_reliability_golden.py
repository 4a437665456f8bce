"""Goldens that cannot be misread: every header field checked by type and range, writes through
symlinks replace the target, temp files of killed writers are cleaned up."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import numoracle
from numoracle.testing import GoldenError, read_golden, write_golden
from numoracle.testing.goldenfiles import MAX_DEPTH, temp_prefix

SRC = str(Path(numoracle.__file__).resolve().parents[1])


def _resealed(data: bytes, edit) -> bytes:
    """The file with its header edited by ``edit`` (on the JSON text or the dict) and the checksum recomputed."""
    magic, header, rest = data.split(b"\n", 2)
    text = header.decode()
    if callable(edit):
        h = json.loads(text)
        edit(h)
        text = json.dumps(h, sort_keys=True, separators=(",", ":"))
    else:
        text = edit
    body = magic + b"\n" + text.encode() + b"\n" + rest[:-73]
    return body + b"\nsha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n"


@pytest.fixture
def int8_file(tmp_path):
    return write_golden(tmp_path / "g.golden", np.array([-1, 2, -3], np.int8))


@pytest.fixture
def fp16_file(tmp_path):
    return write_golden(tmp_path / "h.golden", np.array([1.0, -2.0], np.float16))


def _refused(path: Path, data: bytes, match: str) -> None:
    path.write_bytes(data)
    with pytest.raises(GoldenError, match=match):
        read_golden(path)


@pytest.mark.parametrize(("field", "value"), [("signed", "false"), ("signed", 0), ("bits", "8"), ("bits", 8.0),
                                              ("bits", True), ("bits", 2**80)])
def test_int_spec_fields_are_typed(int8_file, field, value):
    data = int8_file.read_bytes()
    _refused(int8_file, _resealed(data, lambda h: h["format_spec"].update({field: value})), "invalid")


@pytest.mark.parametrize(("field", "value"), [("bias", "7"), ("bias", 7.0), ("exp_bits", None), ("has_inf", "yes"),
                                              ("signed", 1), ("nan", 3), ("man_bits", -(2**70))])
def test_float_spec_fields_are_typed(fp16_file, field, value):
    data = fp16_file.read_bytes()
    _refused(fp16_file, _resealed(data, lambda h: h["format_spec"].update({field: value})), "invalid")


@pytest.mark.parametrize(("edit", "match"), [
    (lambda h: h.update(nbytes=True), "nbytes"),
    (lambda h: h.update(nbytes=2**200), "nbytes"),
    (lambda h: h.update(shape=[2**70, 0]), "shape"),
    (lambda h: h.update(shape=[1] * 40), "shape"),
    (lambda h: h.update(shape=[True, 2]), "shape"),
    (lambda h: h.update(format=["fp16"]), "format"),
    (lambda h: h["format_spec"].update(extra=1), "invalid fields"),
    (lambda h: h.update(code_dtype=16), "code_dtype"),
])
def test_header_fields_are_checked_before_use(fp16_file, edit, match):
    _refused(fp16_file, _resealed(fp16_file.read_bytes(), edit), match)


def test_deep_nesting_is_refused_without_recursion_error(fp16_file):
    data = fp16_file.read_bytes()
    head = json.loads(data.split(b"\n", 2)[1])
    deep = json.dumps({**head, "meta": {"x": "[" * 0}}, sort_keys=True, separators=(",", ":"))
    deep = deep.replace('"x":""', '"x":' + "[" * 100000 + "]" * 100000)
    _refused(fp16_file, _resealed(data, deep), f"deeper than {MAX_DEPTH}")
    strings = json.dumps({**head, "meta": {"x": "[[[[" * 100}}, sort_keys=True, separators=(",", ":"))
    fp16_file.write_bytes(_resealed(data, strings))  # brackets inside strings do not count
    assert read_golden(fp16_file).meta == {"x": "[[[[" * 100}


def test_valid_header_still_reads(int8_file):
    assert read_golden(int8_file).codes.tolist() == [0xFF, 2, 0xFD]


# ---- symlinks and temp files ---------------------------------------------------------------------
def test_write_through_a_symlink_replaces_the_target(tmp_path):
    target = tmp_path / "real" / "g.golden"
    write_golden(target, np.array([1.0], np.float32))
    link = tmp_path / "link.golden"
    link.symlink_to(target)
    write_golden(link, np.array([2.0, 3.0], np.float32))
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert read_golden(target).shape == (2,) and read_golden(link).shape == (2,)


def test_write_through_a_chain_of_symlinks(tmp_path):
    target = tmp_path / "g.golden"
    write_golden(target, np.array([1.0], np.float32))
    (tmp_path / "a").symlink_to(target)
    (tmp_path / "b").symlink_to(tmp_path / "a")
    write_golden(tmp_path / "b", np.array([5.0], np.float32))
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert read_golden(target).codes.view(np.float32).tolist() == [5.0]


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_temp_files_of_killed_writers_are_cleaned_on_the_next_write(tmp_path):
    g = tmp_path / "g.golden"
    dead = temp_prefix(g).replace(f"-{os.getpid()}-", f"-{_dead_pid()}-") + "abc123.tmp"
    (tmp_path / dead).write_bytes(b"NUMORACLE-GOLDEN 1\npartial")
    live = temp_prefix(tmp_path / "other.golden").replace(f"-{os.getpid()}-", f"-{os.getppid()}-") + "x.tmp"
    (tmp_path / live).write_bytes(b"a live writer's")
    foreign = tmp_path / ".notes.tmp"
    foreign.write_text("not ours")
    write_golden(tmp_path / "new.golden", np.array([1], np.int8))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert dead not in left and live in left and ".notes.tmp" in left and "new.golden" in left


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
def test_a_writer_killed_mid_write_leaves_nothing_after_the_next_write(tmp_path):
    code = ("import numpy as np, os, signal\n"
            "import numoracle.testing.golden as g\n"
            "real = os.fsync\n"
            "def die(fd):\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            "g.os.fsync = die\n"
            f"g.write_golden({str(tmp_path / 'big.golden')!r}, np.zeros(1000, np.float32))\n")
    p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert p.returncode == -signal.SIGKILL
    leftovers = [q for q in tmp_path.iterdir() if q.name.endswith(".tmp")]
    assert leftovers and not (tmp_path / "big.golden").exists()
    time.sleep(0.1)
    write_golden(tmp_path / "big.golden", np.zeros(3, np.float32))
    assert [q.name for q in tmp_path.iterdir()] == ["big.golden"]
