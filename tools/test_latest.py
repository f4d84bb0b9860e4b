"""Run quantspec's conformance suites against the newest release of every runtime (``./dev test-latest``).

``./dev test-latest`` builds ``.venv-latest`` with quantspec and its test dependencies at their newest
releases (no lock: ``python tools/test_latest.py --requirements`` lists what it upgrades), then runs
this script, which runs each runtime's conformance tests in that environment and prints per runtime:
the installed version, whether quantspec lists it as verified, the test cases compared, how many
differ, and the first difference.  It exits 1 when any case differs.

    ./dev test-latest                 # every runtime
    ./dev test-latest onnxruntime     # only these runtimes' suites
    ./dev test-latest --json FILE     # also write the summary as JSON

A case is one parametrized test: one corpus of inputs (hundreds of values: ties, ±0, ±inf, NaN,
denormals, saturation edges) through quantspec and through the runtime, compared byte for byte.
torch is held at the CPU wheel the lock names: it is the harness of the compressed-tensors tests,
not a runtime quantspec reproduces, and newer releases on the package registry are GPU builds of
several GB.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: per runtime (as quantspec.versions names it): its conformance suites, one pytest run each
SUITES: dict[str, list[list[str]]] = {
    "onnx": [["tests/test_onnx_conformance.py", "-k", "reference"], ["tests/test_onnx_backend.py"]],
    "onnxruntime": [["tests/test_onnx_conformance.py", "-k", "onnxruntime"], ["tests/test_onnx_divergences.py"],
                    ["tests/test_calibrate.py"]],
    "tensorflow-cpu": [["tests/test_tf_conformance.py", "tests/test_tf_nan.py", "tests/test_tf_onednn.py"]],
    "ai-edge-litert": [["tests/test_litert_kernels_activations.py", "tests/test_litert_kernels_elementwise.py",
                        "tests/test_litert_kernels_extra.py", "tests/test_litert_kernels_int16.py",
                        "tests/test_litert_kernels_quantize.py", "tests/test_litert_kernels_reduce.py",
                        "tests/test_litert_conv.py", "tests/test_litert_fully_connected.py",
                        "tests/test_litert_modes_models.py", "tests/test_litert_zoo.py",
                        "tests/test_litert_params.py"]],
    "compressed-tensors": [["tests/test_checkpoint_ct.py"]],
    "numpy, ml_dtypes, numba": [["tests/test_onnx_fast.py", "tests/test_tf_fast.py", "tests/test_litert_fast.py",
                                 "tests/test_checkpoint_schemes.py"]],
}

#: held back from the upgrade (see the module docstring)
HELD = {"torch": "torch==2.13.0"}


def requirements() -> list[str]:
    """quantspec's core and test dependencies by name, without versions (torch: :data:`HELD`)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = []
    for req in meta["dependencies"] + meta["optional-dependencies"]["test"]:
        name = re.match(r"[A-Za-z0-9_.\-]+(\[[^\]]*\])?", req.split("#")[0].strip()).group(0)
        names.append(HELD.get(name.split("[")[0].lower(), name))
    return names


def run_suite(runs: list[list[str]]) -> dict:
    """Run each pytest run of a suite; count the cases that ran and those that failed."""
    cases = differ = 0
    first = None
    for run in runs:
        with tempfile.TemporaryDirectory() as tmp:
            xml = Path(tmp) / "junit.xml"
            cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
                   f"--junitxml={xml}", *run]
            env = dict(os.environ, QUANTSPEC_REQUIRE_REFERENCES="1")
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            if not xml.exists():
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
                return {"cases": cases, "differ": None, "first": f"{' '.join(run)}: pytest did not run: "
                        + " / ".join(tail)}
            for case in ET.parse(xml).getroot().iter("testcase"):
                bad = case.find("failure")
                if bad is None:
                    bad = case.find("error")
                if case.find("skipped") is not None:
                    continue
                cases += 1
                if bad is not None:
                    differ += 1
                    if first is None:
                        message = (bad.get("message") or bad.text or "").strip().splitlines()
                        first = f"{case.get('classname')}::{case.get('name')}: {message[0][:300] if message else ''}"
    return {"cases": cases, "differ": differ, "first": first}


def main(argv: list[str]) -> int:
    if "--requirements" in argv:
        print(" ".join(requirements()))
        return 0
    json_out = None
    if "--json" in argv:
        i = argv.index("--json")
        json_out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    sys.path.insert(0, str(ROOT / "src"))
    from quantspec import versions

    chosen = argv or list(SUITES)
    unknown = [n for n in chosen if n not in SUITES]
    if unknown:
        print(f"test-latest: unknown runtime {unknown[0]!r}; choose from {', '.join(SUITES)}", file=sys.stderr)
        return 2
    rows = []
    for name in chosen:
        dists = [n.strip() for n in name.split(",")]
        shown = ", ".join(f"{d} {versions.installed(d) or '(not installed)'}"
                          + ("" if versions.is_verified(d) else " (not verified)") for d in dists)
        print(f"{name}: running {' ; '.join(' '.join(run) for run in SUITES[name])} ...", flush=True)
        result = run_suite(SUITES[name])
        rows.append({"runtime": name, "versions": shown, **result})
    print()
    print(f"{'runtime':<26} {'version':<46} {'cases':>6} {'differ':>6}  first difference")
    for r in rows:
        differ = "?" if r["differ"] is None else r["differ"]
        print(f"{r['runtime']:<26} {r['versions']:<46} {r['cases']:>6} {differ:>6}  {r['first'] or '-'}")
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["differ"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
