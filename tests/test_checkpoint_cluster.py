"""``convert(..., dask=...)``: the same conversion on a Dask cluster (a LocalCluster of 2 worker
processes, one thread each, shared by the tests of this module), byte-identical to the single-machine
run; a worker killed mid-run; tasks that fail for good; the forms of the ``dask`` argument and
``file://`` URLs; the command line without dask installed."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

import checkpoint_corpus
from refs import require, require_fast

from quantspec import checkpoint
from quantspec._tensorfiles import tensorio
from quantspec.checkpoint import layout
from quantspec.checkpoint.cluster import DaskBackend, TaskFailedError, parse
from quantspec.cli import main
from quantspec.errors import InvalidArgumentError, TensorFileError, UnsupportedError


@pytest.fixture(autouse=True)
def _fast():
    require_fast()


@pytest.fixture(scope="module")
def client():
    distributed = require("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "src"
    return path, checkpoint_corpus.build(path)


@pytest.fixture
def small_slabs(monkeypatch):
    monkeypatch.setattr(layout, "SLAB_BYTES", 3000)     # many slabs per tensor (the plan carries them)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _final(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if not p.name.startswith("."))


@pytest.mark.parametrize("scheme, fmt", [("int4-b32", "quantspec"), ("int8-tensor", "quantspec"),
                                         ("mxfp6-e3m2", "quantspec"), ("uint8-asym", "compressed-tensors")])
def test_two_workers_write_the_bytes_of_one_machine(corpus, client, tmp_path, small_slabs, scheme, fmt):
    src, _ = corpus
    one = tmp_path / "one"
    checkpoint.convert(src, one, scheme, max_shard_size="20KB", format=fmt, progress=False)
    events = []
    rep = checkpoint.convert(f"file://{src}", f"file://{tmp_path}/two", scheme, max_shard_size="20KB", format=fmt,
                             progress=events.append, dask=client)
    assert len(rep.shards) > 3
    assert _files(tmp_path / "two") == _files(one)
    # tensors of many slabs
    big = max(rep.tensors, key=lambda t: t.bytes_in)
    assert big.bytes_in // 3000 >= 10
    assert events[-1].kind == "done" and events[-1].done == events[-1].total == events[0].total
    assert sum(e.kind == "shard" for e in events) == len(rep.shards)


def test_the_slabs_of_one_tensor_run_on_every_worker(client, tmp_path, monkeypatch):
    """A single tensor: its slabs are the tasks, and both workers compute some of them."""
    distributed = require("distributed")
    monkeypatch.setattr(layout, "SLAB_BYTES", 64 << 10)
    rng = np.random.default_rng(0)
    tensorio.write_tensors(tmp_path / "m.safetensors", {"w": (rng.standard_normal((512, 4096)) * 0.02)
                                                        .astype(np.float32)})
    with distributed.get_task_stream(client) as stream:
        rep = checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "two", "int8", progress=False, dask=client)
    assert rep["w"].bytes_in // (64 << 10) == 128
    workers = [t["worker"] for t in stream.data if str(t["key"]).startswith("_remote")]
    assert len(workers) == 128 and len(set(workers)) == 2
    checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "one", "int8", progress=False)
    assert _files(tmp_path / "two") == _files(tmp_path / "one")


def test_a_worker_killed_mid_run_gives_the_same_bytes(corpus, client, tmp_path, small_slabs):
    src, _ = corpus
    one = tmp_path / "one"
    checkpoint.convert(src, one, "uint4-b32-asym", max_shard_size="20KB", progress=False)
    pids = sorted(client.run(os.getpid).values())
    killed = []

    def kill(event):
        if event.kind == "slab" and not killed and event.done > event.total // 5:
            os.kill(pids[0], signal.SIGKILL)            # as a machine that goes away: no goodbye
            killed.append(pids[0])

    rep = checkpoint.convert(src, tmp_path / "two", "uint4-b32-asym", max_shard_size="20KB", progress=kill,
                             dask=client)
    assert killed and rep.quantized
    assert _files(tmp_path / "two") == _files(one)
    client.wait_for_workers(2, timeout=60)               # the nanny restarted it
    assert pids[0] not in client.run(os.getpid).values()


def _register_by_value():
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_tasks_failing_for_good_name_their_tensors_and_leave_nothing_final(corpus, client, tmp_path, small_slabs,
                                                                             monkeypatch):
    """An I/O error on every try for one tensor's slabs: retried, then the run stops; the error names
    the tensor; no file under a final name; finished shards stay hidden and a rerun (here on one
    machine) completes byte-identical."""
    from quantspec.checkpoint import backend as backend_module

    src, _ = corpus
    victim = "model.layers.1.mlp.up_proj.weight"
    tries = []

    class Flaky(DaskBackend):
        def map(self, fn, items, on_result):
            def broken(task):
                if task.phase == "encode" and task.entry.source.name == victim:
                    raise OSError(5, "Input/output error")
                return fn(task)

            tries.append(1)
            return super().map(broken, items, on_result)

    _register_by_value()
    monkeypatch.setattr(backend_module, "DaskBackend", Flaky, raising=False)
    monkeypatch.setattr("quantspec.checkpoint.cluster.DaskBackend", Flaky)
    dst = tmp_path / "dst"
    with pytest.raises(TaskFailedError, match=f"'{victim}'") as e:
        checkpoint.convert(src, dst, "int4-b64", max_shard_size="20KB", progress=False, dask=client)
    assert "OSError" in str(e.value) and "failed for good" in str(e.value)
    assert _final(dst) == [] and not list(dst.glob(".*.partial"))
    assert list(dst.glob(".*.done"))                      # the shards finished before the failure
    rep = checkpoint.convert(src, dst, "int4-b64", max_shard_size="20KB", progress=False)
    assert rep.resumed
    checkpoint.convert(src, tmp_path / "whole", "int4-b64", max_shard_size="20KB", progress=False)
    assert _files(dst) == _files(tmp_path / "whole")


def test_bad_data_found_on_a_worker_is_the_same_error_and_is_not_retried(client, tmp_path):
    distributed = require("distributed")
    from quantspec.errors import RangeError

    rng = np.random.default_rng(4)
    w = (rng.standard_normal((40, 64)) * 0.1).astype(np.float32)
    w[33, 5] = np.nan
    tensorio.write_tensors(tmp_path / "m.safetensors", {"a.weight": np.ones((8, 64), np.float32), "l4.weight": w})
    out = tmp_path / "out"
    with distributed.get_task_stream(client) as stream:
        with pytest.raises(RangeError, match=r"'l4.weight' holds NaN or infinity \(row 33\)"):
            checkpoint.convert(tmp_path / "m.safetensors", out, "int8", progress=False, dask=client)
    assert list(out.iterdir()) == []
    keys = [str(t["key"]) for t in stream.data if str(t["key"]).startswith("_remote")]
    assert keys and len(keys) == len(set(keys))                 # each task ran once: no retry


def test_the_dask_argument(client, tmp_path, monkeypatch):
    assert parse("local:3") == ("local", 3) and parse(" tcp://10.0.0.5:8786 ") == ("address", "tcp://10.0.0.5:8786")
    assert parse(client) == ("client", client)
    for bad in ("local:0", "local:x", "", 3, "tcp://a b"):
        with pytest.raises(InvalidArgumentError, match="dask"):
            parse(bad)
    tensorio.write_tensors(tmp_path / "m.safetensors", {"w": np.ones((4, 32), np.float32)})
    monkeypatch.setattr("quantspec.checkpoint.cluster.CONNECT_TIMEOUT", "2s")
    with pytest.raises(InvalidArgumentError, match="could not connect to a Dask scheduler"):
        checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "o", "int8", progress=False,
                           dask="tcp://127.0.0.1:9")
    assert not (tmp_path / "o").exists()


def test_urls_of_other_file_systems_are_refused(tmp_path):
    tensorio.write_tensors(tmp_path / "m.safetensors", {"w": np.ones((4, 32), np.float32)})
    with pytest.raises(UnsupportedError, match="'s3' is not read or written directly"):
        checkpoint.convert("s3://bucket/model", tmp_path / "o", "int8", progress=False)
    with pytest.raises(InvalidArgumentError, match="absolute path"):
        checkpoint.convert("file://host/m.safetensors", tmp_path / "o", "int8", progress=False)
    rep = checkpoint.convert(f"file://{tmp_path}/m.safetensors", f"file://{tmp_path}/o", "int8", progress=False)
    assert rep.quantized and checkpoint.open(f"file://{tmp_path}/o").names() == ["w"]
    with pytest.raises(TensorFileError):
        checkpoint.convert(f"file://{tmp_path}/missing.safetensors", tmp_path / "p", "int8", progress=False)


def test_local_n_on_the_command_line(corpus, tmp_path, capsys):
    src, _ = corpus
    assert main(["convert", str(src), str(tmp_path / "a"), "--scheme", "int8", "--dask", "local:1", "--quiet"]) == 0
    checkpoint.convert(src, tmp_path / "b", "int8", progress=False)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_without_dask_the_command_says_how_to_install_it(corpus, tmp_path, capsys, monkeypatch):
    src, _ = corpus
    monkeypatch.setitem(sys.modules, "distributed", None)     # import distributed -> ImportError
    assert main(["convert", str(src), str(tmp_path / "a"), "--scheme", "int8", "--dask", "local:2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'quantspec[dask]'" in err
    assert not (tmp_path / "a").exists()


def test_bench_reports_one_and_two_workers_beside_one_process(capsys):
    require("onnxruntime")
    assert main(["bench", "--only", "convert", "--size", str(1 << 20), "--rounds", "1", "--dask", "local:2"]) == 0
    out = capsys.readouterr().out
    assert "convert int4-b32 on Dask, 1 worker" in out and "convert int4-b32 on Dask, 2 workers" in out
    assert out.count("per-task overhead") == 2 and out.count("bytes identical") == 2
    assert "of one process's rate" in out
