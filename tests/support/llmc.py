"""llm-compressor as an oracle, and the tiny Llama checkpoints the checkpoint tests build.

llm-compressor (``llmcompressor``) pins compressed-tensors and transformers at versions other than
the test environment's (requirements/test.txt), so it lives in an environment of its own,
``.venv/llmc`` (requirements/llmcompressor.txt; ``./dev test`` creates it and sets
``QUANTSPEC_LLMC_PYTHON`` to its interpreter), and runs in a subprocess: :func:`model_free_ptq`.
Without that interpreter the tests that need it are skipped, or fail with
``QUANTSPEC_REQUIRE_REFERENCES=1`` (as a missing reference runtime does, :mod:`refs`).

:func:`tiny_llama` builds a small random ``LlamaForCausalLM`` checkpoint in *this* process (the test
environment's transformers; nothing is downloaded), sharded as ``save_pretrained`` shards;
:func:`cached_tiny_llama` builds each distinct one once per session (per pytest-xdist worker) under
pytest's base temporary directory, and :func:`model_free_ptq` (:func:`model_free_ptq_many`: several
in one subprocess) runs each distinct (source, scheme, ignore list) once per session.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from refs import REQUIRE, require

#: the environment variable naming the oracle environment's interpreter
ENV = "QUANTSPEC_LLMC_PYTHON"

_PROBE = """
import json, importlib.metadata as m
out = {}
for d in ("llmcompressor", "compressed-tensors", "transformers", "torch"):
    try:
        out[d] = m.version(d)
    except m.PackageNotFoundError:
        out[d] = None
print(json.dumps(out))
"""

_PTQ = """
import json, sys
import llmcompressor
for a in json.loads(sys.argv[1]):
    llmcompressor.model_free_ptq(a["src"], a["dst"], scheme=a["scheme"], ignore=a["ignore"], max_workers=1,
                                 device="cpu")
"""

_versions: dict[str, str] | None = None
_models: dict[tuple, Path] = {}
_ptq: dict[tuple, Path] = {}


def _missing(message: str):
    if REQUIRE:
        pytest.fail(message + " (QUANTSPEC_REQUIRE_REFERENCES=1: a missing reference is a failure)")
    pytest.skip(message)


def _env() -> dict[str, str]:
    """The oracle's environment: this one without what would reach into it (PYTHONPATH and the
    like, quantspec's own settings), CPU only, never the hub."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "QUANTSPEC_", "VIRTUAL_ENV", "CONDA_"))}
    env.update(CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false", PYTHONNOUSERSITE="1")
    return env


def _run(python: str, code: str, *args: str, timeout: float, cwd: str | os.PathLike | None = None,
         what: str) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run([python, "-I", "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                           env=_env(), cwd=cwd)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-4000:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        raise AssertionError(f"llm-compressor oracle ({python}): {what} took more than {timeout} s\n"
                             f"--- stderr (tail) ---\n{tail}") from None
    if p.returncode:
        raise AssertionError(f"llm-compressor oracle ({python}): {what} failed with exit status {p.returncode}\n"
                             f"--- stderr (tail) ---\n{p.stderr[-4000:]}")
    return p


def llmc_python() -> str:
    """The oracle environment's interpreter (``$QUANTSPEC_LLMC_PYTHON``), checked once to hold
    llm-compressor; a failure (QUANTSPEC_REQUIRE_REFERENCES=1) or a skip when it is missing."""
    python = os.environ.get(ENV)
    if not python:
        _missing(f"the llm-compressor oracle is not set up: ${ENV} is not set (./dev test creates .venv/llmc "
                 "from requirements/llmcompressor.txt and sets it)")
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        _missing(f"the llm-compressor oracle is not set up: ${ENV}={python!r} is not an executable file")
    if llmc_versions(python).get("llmcompressor") is None:
        _missing(f"the llm-compressor oracle is not set up: {python} has no llmcompressor installed")
    return python


def llmc_versions(python: str | None = None) -> dict[str, str | None]:
    """The versions of llmcompressor, compressed-tensors, transformers and torch in the oracle's
    environment (None for one not installed); one subprocess, once per session."""
    global _versions
    if _versions is None:
        py = python if python is not None else llmc_python()
        p = _run(py, _PROBE, timeout=120, what="reading its package versions")
        try:
            _versions = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AssertionError(f"llm-compressor oracle ({py}): unreadable versions {p.stdout!r}") from None
    return dict(_versions)


def tiny_llama(path: str | os.PathLike, *, seed: int = 0, dtype: str = "bfloat16", hidden_size: int = 256,
               intermediate_size: int = 384, num_hidden_layers: int = 2, num_attention_heads: int = 4,
               num_key_value_heads: int = 2, vocab_size: int = 512, tie_word_embeddings: bool = False,
               max_shard_size: str = "1MB", std: float = 0.05) -> Path:
    """A random ``LlamaForCausalLM`` checkpoint in ``path``: safetensors shards (``max_shard_size``),
    their index, ``config.json`` and ``generation_config.json``, as ``save_pretrained`` writes them.

    Built in this process by the test environment's transformers, from a ``LlamaConfig`` alone (no
    download).  Every parameter is drawn from ``torch.normal`` under ``torch.manual_seed(seed)``, in
    the order of ``named_parameters``: mean 0 and ``std`` for the matrices, mean 1 and ``std`` for the
    normalization weights (near 1, as in a trained model, so that activations keep their size through
    the layers); then the model is cast to ``dtype``."""
    torch = require("torch")
    transformers = require("transformers")
    path = Path(path)
    config = transformers.LlamaConfig(
        hidden_size=hidden_size, intermediate_size=intermediate_size, num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads, num_key_value_heads=num_key_value_heads, vocab_size=vocab_size,
        tie_word_embeddings=tie_word_embeddings, dtype=dtype)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            mean = 1.0 if name.endswith("norm.weight") else 0.0
            p.copy_(torch.normal(mean, std, tuple(p.shape), dtype=torch.float32))
    model = model.to(getattr(torch, dtype)).eval()
    if path.exists():
        shutil.rmtree(path)
    model.save_pretrained(path, max_shard_size=max_shard_size)
    for name in ("config.json", "generation_config.json"):
        assert (path / name).is_file(), f"save_pretrained wrote no {name} in {path}"
    return path


def _key(kw: dict) -> str:
    return hashlib.sha256(json.dumps(kw, sort_keys=True).encode()).hexdigest()[:12]


def cached_tiny_llama(tmp_path_factory, **kw) -> Path:
    """:func:`tiny_llama` with these arguments, built once per session (per xdist worker) in pytest's
    base temporary directory.  Read it, never write into it."""
    key = tuple(sorted(kw.items()))
    hit = _models.get(key)
    if hit is None or not (hit / "config.json").is_file():
        hit = _models[key] = tiny_llama(Path(tmp_path_factory.getbasetemp()) / f"tiny-llama-{_key(kw)}", **kw)
    return hit


def model_free_ptq(src: str | os.PathLike, dst: str | os.PathLike, scheme: str, ignore=(), *,
                   timeout: float = 600) -> Path:
    """llm-compressor's ``model_free_ptq(src, dst, scheme=scheme, ignore=list(ignore), max_workers=1,
    device="cpu")`` in the oracle's environment (a subprocess); returns ``dst``.

    Each distinct (src, scheme, ignore) runs once per session: a second call copies the first one's
    output into ``dst`` (or returns it, when ``dst`` is the same).  A failure is an AssertionError that
    carries the tail of the oracle's stderr."""
    return model_free_ptq_many(src, [(dst, scheme, ignore)], timeout=timeout)[0]


def model_free_ptq_many(src: str | os.PathLike, jobs, *, timeout: float = 600) -> list[Path]:
    """:func:`model_free_ptq` of ``src`` for each ``(dst, scheme, ignore)`` of ``jobs``, those not made
    yet in this session run one after the other in *one* subprocess (llm-compressor takes seconds to
    import); returns the ``dst`` paths."""
    python = llmc_python()
    src = Path(src).resolve()
    todo, out = [], []
    for dst, scheme, ignore in jobs:
        dst, ignore = Path(dst).resolve(), list(ignore)
        out.append(dst)
        hit = _ptq.get((str(src), scheme, tuple(ignore)))
        if hit is not None and (hit / "config.json").is_file():
            if hit != dst:
                if dst.exists():
                    shutil.rmtree(dst)
                shutil.copytree(hit, dst)
            continue
        if dst.exists():
            shutil.rmtree(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        todo.append({"src": str(src), "dst": str(dst), "scheme": scheme, "ignore": ignore})
    if not todo:
        return out
    calls = "; ".join(f"model_free_ptq({a['src']!r}, {a['dst']!r}, scheme={a['scheme']!r}, ignore={a['ignore']!r})"
                      for a in todo)
    _run(python, _PTQ, json.dumps(todo), timeout=timeout, cwd=out[0].parent, what=calls)
    for a in todo:
        dst, scheme = Path(a["dst"]), a["scheme"]
        config = dst / "config.json"
        try:
            qc = json.loads(config.read_text())["quantization_config"]
        except (OSError, ValueError, KeyError, TypeError):
            raise AssertionError(f"llm-compressor's model_free_ptq({scheme!r}) exited 0 but wrote no config.json with "
                                 f"a quantization_config in {dst}") from None
        assert qc.get("quant_method") == "compressed-tensors", f"{config}: quant_method {qc.get('quant_method')!r}"
        assert any(dst.glob("*.safetensors")), f"llm-compressor's model_free_ptq({scheme!r}) wrote no shard in {dst}"
        _ptq[(a["src"], scheme, tuple(a["ignore"]))] = dst
    return out
