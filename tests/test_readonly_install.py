"""quantspec installed where nothing can be written: the fast kernels still run (compiled in memory).

The package is installed (its files copied and byte-compiled, as pip installs a pure-Python package)
into a directory that is then made read-only, with a read-only home and cache directory, and no
``NUMBA_CACHE_DIR``: numba can keep its cache nowhere.  One call of each spec must take the fast path
and give the reference path's bytes, and quantspec must say once, on stderr, that the kernels are
compiled in memory (before, every call died with ``RuntimeError: cannot cache function '_map': no
locator available``).

A read-only location: file permissions for an ordinary user; for root (whom permissions do not stop)
read-only bind mounts in a private mount namespace (``unshare -m``).
"""

import compileall
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys
import numpy as np
import quantspec, quantspec.onnx as qo, quantspec.tf as qtf, quantspec.litert as L
from quantspec._fastpath import jit

x = np.concatenate([np.linspace(-40, 40, 4001, dtype=np.float32), np.float32([np.nan, np.inf, -np.inf, 0.125])])
calls = {
    "onnx": lambda: qo.quantize_linear(x, np.float32(0.05), np.int8(3)),
    "tf": lambda: qtf.quantize(x, -5.0, 5.0, "qint8", mode="SCALED")[0],
    "litert": lambda: L.quantize(x, L.QuantParams(np.float32([0.05]), np.int64([3]))),
}
fast = {k: f() for k, f in calls.items()}
compiled = len(sys.modules["quantspec._fastpath.fastmap"].plain.overloads)      # one kernel for each spec's call
with jit.reference_only():
    ref = {k: f() for k, f in calls.items()}
print(json.dumps({"package": quantspec.__file__, "enabled": jit.enabled(), "compiled": compiled,
                  "cache": jit.cache_location(),
                  "equal": {k: fast[k].tobytes() == ref[k].tobytes() and fast[k].dtype == ref[k].dtype for k in calls},
                  "sizes": {k: int(fast[k].size) for k in calls}}))
"""


def _install(target: Path) -> None:
    """The package's files, as a wheel install lays them out, byte-compiled."""
    shutil.copytree(ROOT / "src" / "quantspec", target / "quantspec",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert compileall.compile_dir(str(target / "quantspec"), quiet=1)


def _read_only_command(dirs: list[Path], argv: list[str]) -> list[str] | None:
    """``argv`` run with ``dirs`` read-only, or None when this process cannot make them so."""
    if os.geteuid() != 0:
        for d in dirs:
            for path, subdirs, files in os.walk(d):
                for name in files:
                    os.chmod(os.path.join(path, name), 0o444)
                os.chmod(path, 0o555)
        return argv
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    mounts = " && ".join(f"mount --bind {d} {d} && mount -o remount,bind,ro {d}" for d in dirs)
    probe = subprocess.run([unshare, "-m", "sh", "-c", f"{mounts} && ! touch {dirs[0]}/.probe 2>/dev/null"],
                           capture_output=True)
    if probe.returncode != 0:
        return None
    return [unshare, "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh", *argv]


def test_read_only_install_runs_every_spec_on_the_fast_path(tmp_path):
    site, home = tmp_path / "site", tmp_path / "home"
    home.mkdir()
    (home / ".cache").mkdir()
    _install(site)
    command = _read_only_command([site, home], [sys.executable, "-c", CHILD])
    if command is None:
        pytest.skip("cannot make a read-only location here (root without mount namespaces)")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "QUANTSPEC_CACHE_DIR", "QUANTSPEC_FAST", "PYTHONPATH")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PYTHONPATH=str(site))
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    finally:
        for path, subdirs, files in os.walk(tmp_path):       # let pytest clean up
            os.chmod(path, 0o755)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(result["package"]).resolve().is_relative_to(site.resolve())
    assert result["enabled"] and result["compiled"] == 3 and result["cache"] is None
    assert result["equal"] == {"onnx": True, "tf": True, "litert": True}, result
    assert all(n == 4005 for n in result["sizes"].values())
    notes = [line for line in proc.stderr.splitlines() if "compiled in memory" in line]
    assert len(notes) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "RuntimeError" not in proc.stderr
