"""A subprocess for the fuzzers' calls that could crash or hang a process: a damaged file read mapped
(a page past the end of a file is a SIGBUS), a damaged model in the LiteRT interpreter.  The test
talks to it through :class:`Worker`: one JSON request a line on stdin, one JSON answer a line on
stdout; a crash or a hang is seen by the test, which starts a fresh worker and reports it.  Cheaper
than a fork per call from a test process that holds TensorFlow."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _digest(value: Any) -> Any:
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _digest(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_digest(v) for v in value]
    if isinstance(value, np.ndarray):
        raw = np.ascontiguousarray(value).reshape(-1).view(np.uint8) if value.size else b""
        return [str(value.dtype), list(value.shape), hashlib.sha256(bytes(raw)).hexdigest()]
    if isinstance(value, bytes):
        return hashlib.sha256(value).hexdigest()
    return repr(value)


def _litert(task: dict) -> Any:
    """LiteRT's verdict on a model file: load (the flatbuffer verifier, the builder), and with
    ``inputs`` run it with the reference kernels."""
    import numpy as np
    from ai_edge_litert import interpreter as L

    data = Path(task["path"]).read_bytes()
    # loading: stock LiteRT's kernels (every operator version it has); running: the reference kernels,
    # or the resolver ``task["resolver"]`` names (BUILTIN_WITHOUT_DEFAULT_DELEGATES, AUTO: with XNNPACK)
    resolver = L.OpResolverType.BUILTIN_REF if task.get("run") else L.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    if task.get("resolver"):
        resolver = getattr(L.OpResolverType, task["resolver"])
    try:
        it = L.Interpreter(model_content=data, experimental_op_resolver_type=resolver, num_threads=1)
    except Exception as e:  # noqa: BLE001
        return {"stage": "load", "error": str(e)}
    if not task.get("run"):
        return {"stage": "loaded"}
    try:
        it.allocate_tensors()
        ins = np.load(task["inputs"], allow_pickle=False)
        for i, d in enumerate(it.get_input_details()):
            it.set_tensor(d["index"], np.require(ins[f"arr_{i}"], requirements="C"))
        it.invoke()
        outs = [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    except Exception as e:  # noqa: BLE001
        return {"stage": "run", "error": str(e)}
    np.savez(task["outputs"], *outs)
    return {"stage": "ran", "outputs": _digest(outs)}


def _serve() -> None:
    sys.path.insert(0, str(HERE))
    for line in sys.stdin:
        task = json.loads(line)
        try:
            if task["kind"] == "read":
                import fuzz_files

                fmt = {**fuzz_files.FORMATS, **fuzz_files.MODEL_FORMATS}[task["format"]]
                try:
                    value = fmt.read(Path(task["path"]), task["mapped"])
                    answer = {"ok": _digest(value)}
                except fmt.error as e:
                    answer = {"error": [type(e).__name__, str(e)]}
            elif task["kind"] == "litert":
                answer = {"ok": _litert(task)}
            else:
                answer = {"other": f"unknown task {task['kind']}"}
        except Exception as e:  # noqa: BLE001 - reported: the outcome rule fails
            answer = {"other": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


class Worker:
    """The test's end: ``ask(task, timeout)`` -> the answer dict, or ``{"crash": code}`` /
    ``{"timeout": seconds}`` (the worker is then replaced)."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def _start(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([sys.executable, "-u", __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)

    def ask(self, task: dict, timeout: float = 60.0) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps(task) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.close()
            return {"timeout": timeout}
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.proc = None
            return {"crash": code}
        return json.loads(line)

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def encode(b: bytes) -> str:
    return base64.b64encode(b).decode()


if __name__ == "__main__":
    _serve()
