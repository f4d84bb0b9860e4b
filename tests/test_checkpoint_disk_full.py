"""A disk that fills (or fails) while ``convert`` commits: nothing new under a final name, and a rerun
completes.

The commit's every call that can fail — ``os.open``, ``fchmod``, ``write``, ``fsync``, ``close``,
``replace``, ``rename``, ``unlink`` as :mod:`quantspec.checkpoint.writer` makes them — is made to
fail in turn: the Nth call raises ``OSError(ENOSPC)`` (or ``EIO``), for N = 1, 2, ... until a commit
runs with no call left to fail.  After each failure: the error is a ``TensorFileError`` that says what
happened; ``DST`` holds under final names exactly the files, byte for byte, it held before (none
for a first run, an earlier conversion's for a rerun over one); and the same conversion run again
without the fault keeps the finished shards and writes the bytes of a clean conversion.  In the
"disk stays full" runs, every later call that needs room fails too (the undoing renames do not).
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import types
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from quantspec import checkpoint
from quantspec.checkpoint import writer
from quantspec.cli import main
from quantspec.errors import QuantSpecError, TensorFileError

SCHEME, SHARD = "int8", "6KB"
#: the calls of the writer that the tests make fail
FAULTABLE = ("open", "fchmod", "write", "fsync", "close", "replace", "rename", "unlink")


class FaultyOS:
    """The ``os`` module as :mod:`.writer` sees it, while armed counting the calls of
    :data:`FAULTABLE` and failing the ``n``-th with ``OSError(code)``.  ``sticky``: the disk stays
    full, so every later call that needs room (``write``, ``fsync``, ``open`` creating a file) fails
    too.  ``fired``: the name of the call that failed first (None: fewer than ``n`` calls)."""

    def __init__(self, n: int, code: int = errno.ENOSPC, sticky: bool = False, only: str | None = None):
        self.n, self.code, self.sticky, self.only = n, code, sticky, only
        self.count = 0
        self.armed = False
        self.fired: str | None = None
        self.calls: list[str] = []

    def __getattr__(self, name):
        real = getattr(os, name)
        if name not in FAULTABLE:
            return real

        def call(*args, **kwargs):
            if self.armed and (self.only is None or name == self.only):
                self.count += 1
                self.calls.append(name)
                needs_room = name in ("write", "fsync") or (name == "open" and len(args) > 1
                                                              and args[1] & os.O_CREAT)
                if self.count == self.n or (self.sticky and self.fired and needs_room):
                    self.fired = self.fired or name
                    raise OSError(self.code, os.strerror(self.code))
            return real(*args, **kwargs)

        return call


def _arm(monkeypatch, fault: FaultyOS) -> None:
    """``fault`` replaces the writer's ``os``, armed during ``Output.commit`` only."""
    commit = writer.Output.commit

    def armed(self, manifest):
        fault.armed = True
        try:
            return commit(self, manifest)
        finally:
            fault.armed = False

    monkeypatch.setattr(writer, "os", fault)
    monkeypatch.setattr(writer.Output, "commit", armed)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A bfloat16 checkpoint of three shards' worth of int8 output, with a config.json and a
    generation_config.json beside it."""
    src = tmp_path_factory.mktemp("disk-full") / "src"
    src.mkdir()
    rng = np.random.default_rng(0)
    from safetensors.numpy import save_file

    save_file({f"model.layers.{i}.mlp.up_proj.weight": (rng.standard_normal((32, 96)) * 0.05).astype(ml_dtypes.bfloat16)
               for i in range(3)} | {"model.norm.weight": np.ones(96, ml_dtypes.bfloat16)},
              str(src / "model.safetensors"))
    (src / "config.json").write_text('{"model_type": "llama",  "hidden_size": 96}\n')
    (src / "generation_config.json").write_text('{"do_sample": false}')
    return src


@pytest.fixture(scope="module")
def clean(source, tmp_path_factory):
    """The conversion run without a fault: every final file's bytes."""
    out = tmp_path_factory.mktemp("clean") / "out"
    rep = checkpoint.convert(source, out, SCHEME, max_shard_size=SHARD, progress=False)
    assert len(rep.shards) >= 2 and (out / "config.json").exists() and (out / "generation_config.json").exists()
    return _finals(out)


@pytest.fixture(scope="module")
def earlier(source, tmp_path_factory):
    """A finished conversion of the same source under another scheme, with the same shard names
    (so that the commit replaces every file of it) and config files that differ from the source's."""
    out = tmp_path_factory.mktemp("earlier") / "out"
    checkpoint.convert(source, out, "int8-tensor", max_shard_size=SHARD, progress=False)
    (out / "config.json").write_text('{"earlier": true}')
    (out / "generation_config.json").write_text('{"earlier": 1}')
    return out


def _finals(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.startswith(".")} if d.exists() else {}


def _hidden(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def _convert(source, dst, **kw):
    return checkpoint.convert(source, dst, SCHEME, max_shard_size=SHARD, progress=False, **kw)


def _every_step(source, clean, tmp_path, monkeypatch, prepare, code=errno.ENOSPC, sticky=False):
    """Fail the commit's first, second, ... call until a commit completes with no call failed; check
    each failure and its rerun.  ``prepare(dst)``: DST's state before the run.  Returns the names of
    the calls made to fail."""
    fired = []
    for n in itertools.count(1):
        dst = tmp_path / f"run{n}"
        prepare(dst)
        before = _finals(dst)
        fault = FaultyOS(n, code, sticky)
        with monkeypatch.context() as m:
            _arm(m, fault)
            try:
                _convert(source, dst)
                raised = None
            except QuantSpecError as e:
                raised = e
        if fault.fired is None:                          # the commit made fewer than n calls: all were tried
            assert raised is None and _finals(dst) == clean and _hidden(dst) == []
            assert n > 20, fault.calls                   # (the commit was seen making its calls)
            break
        fired.append(fault.fired)
        if raised is None:
            # a failure after the checkpoint is complete (removing what the earlier one had and this
            # one does not): the new checkpoint stands, an earlier file at most is left beside it
            now = _finals(dst)
            assert {k: now[k] for k in clean} == clean, (n, fault.fired)
            assert all(now[k] == before.get(k) for k in set(now) - set(clean)), (n, fault.fired)
            # and at most a set-aside file of the earlier one (removed by the next commit)
            assert all(h.endswith(writer.OLD) for h in _hidden(dst)), (n, fault.fired, _hidden(dst))
            shutil.rmtree(dst)
            continue
        else:
            where = (n, fault.fired, str(raised))
            assert isinstance(raised, TensorFileError) and raised.argument == "dst", where
            assert str(raised).startswith("dst: ran out of space" if code == errno.ENOSPC
                                          else "dst: could not be written"), where
            assert os.strerror(code) in str(raised) and "\n" not in str(raised), where
            assert ("free some space and run the same conversion again" if code == errno.ENOSPC
                    else "run the same conversion again once the cause is fixed") in str(raised), where
            assert "finished shards are kept" in str(raised) and raised.keeps_finished, where
            assert _finals(dst) == before, where         # nothing new, nothing lost, under a final name
            rep = _convert(source, dst)
            assert rep.resumed == rep.shards, where      # the finished shards were kept, not recomputed
        assert _finals(dst) == clean and _hidden(dst) == [], (n, fault.fired)
        shutil.rmtree(dst)
    return fired


def test_a_fault_at_any_step_of_a_first_commit_leaves_no_final_name_and_a_rerun_completes(
        source, clean, tmp_path, monkeypatch):
    fired = _every_step(source, clean, tmp_path, monkeypatch, lambda dst: None)
    # every kind of call the commit makes was made to fail
    assert {"open", "fchmod", "write", "fsync", "close", "replace"} <= set(fired), fired


def test_a_disk_that_stays_full_is_undone_by_renames_alone(source, clean, tmp_path, monkeypatch):
    fired = _every_step(source, clean, tmp_path, monkeypatch, lambda dst: None, sticky=True)
    assert {"write", "fsync", "replace"} <= set(fired), fired


def test_an_io_error_at_any_step_is_undone_the_same_way(source, clean, tmp_path, monkeypatch):
    fired = _every_step(source, clean, tmp_path, monkeypatch, lambda dst: None, code=errno.EIO)
    assert "fsync" in fired and "replace" in fired


def test_a_fault_while_replacing_an_earlier_conversion_restores_it(source, clean, earlier, tmp_path, monkeypatch):
    old = _finals(earlier)
    shards = [n for n in old if n.endswith(".safetensors")]
    assert shards and all(n in clean for n in shards) and all(old[n] != clean[n] for n in shards)
    assert old["config.json"] != clean["config.json"]

    def prepare(dst):
        shutil.copytree(earlier, dst)

    fired = _every_step(source, clean, tmp_path, monkeypatch, prepare)
    assert {"write", "fsync", "replace", "unlink"} <= set(fired), fired


def test_a_fault_while_finishing_a_shard_keeps_the_shards_finished_before(source, clean, tmp_path, monkeypatch):
    """Before the commit: the second shard's ``fsync`` fails; the first shard stays (hidden) for the
    rerun, which keeps it."""
    fault = FaultyOS(2, only="fsync")
    monkeypatch.setattr(writer, "os", fault)
    fault.armed = True
    dst = tmp_path / "out"
    with pytest.raises(TensorFileError, match="ran out of space finishing shard") as e:
        _convert(source, dst)
    assert "No space left on device" in str(e.value) and e.value.keeps_finished
    fault.armed = False
    assert _finals(dst) == {} and len(list(dst.glob(".*.done"))) == 1
    rep = _convert(source, dst)
    assert len(rep.resumed) == 1 and _finals(dst) == clean and _hidden(dst) == []


@pytest.mark.parametrize("call", ["write", "replace"])
def test_the_command_line_says_so_in_one_line_and_exits_2(source, clean, tmp_path, monkeypatch, capsys, call):
    dst = tmp_path / "out"
    fault = FaultyOS(1, only=call)
    with monkeypatch.context() as m:
        _arm(m, fault)
        code = main(["convert", str(source), str(dst), "--scheme", SCHEME, "--max-shard-size", SHARD, "--quiet"])
    err = capsys.readouterr().err
    assert fault.fired == call and code == 2, err
    assert err.count("\n") == 1 and err.startswith("quantspec convert: error: TensorFileError: dst: ran out of space")
    assert "No space left on device" in err and _finals(dst) == {}
    assert main(["convert", str(source), str(dst), "--scheme", SCHEME, "--max-shard-size", SHARD, "--quiet"]) == 0
    assert _finals(dst) == clean


def test_a_full_disk_while_writing_a_slab_says_so_and_keeps_finished_shards(source, clean, tmp_path, monkeypatch):
    """A slab's ``pwrite`` fails (a file system without preallocation fills up mid-shard): the error says
    so and is one that keeps the shards finished before (``keeps_finished``: the converter leaves their
    ``.done`` files for the rerun, as the shard-finishing test shows); nothing is under a final name and
    the rerun completes."""
    from quantspec.checkpoint import encode

    def pwrite(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    faulty = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    faulty.pwrite = pwrite
    monkeypatch.setattr(encode, "os", faulty)            # the slabs' writes only (not the shard headers)
    dst = tmp_path / "out"
    with pytest.raises(TensorFileError, match="ran out of space while writing a shard") as e:
        _convert(source, dst)
    assert e.value.keeps_finished and "No space left on device" in str(e.value)
    monkeypatch.setattr(encode, "os", os)
    assert _finals(dst) == {}
    _convert(source, dst)
    assert _finals(dst) == clean


def test_a_full_disk_while_creating_a_shard_is_an_error_of_its_own(source, tmp_path, monkeypatch):
    """The placeholder header's write fails: a quantspec error naming it, not an OSError."""
    def pwrite(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    faulty = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    faulty.pwrite = pwrite
    monkeypatch.setattr(writer, "os", faulty)
    with pytest.raises(TensorFileError, match="ran out of space while creating a shard"):
        _convert(source, tmp_path / "out")
    assert _finals(tmp_path / "out") == {}
