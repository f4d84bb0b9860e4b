"""A checkpoint scheme is one object: a scheme defined here, with a parameter rule no built-in scheme
has, is registered and then converted and verified like the built-in ones, without touching any
module of quantspec.

The scheme: int8 per channel (axis 0), ``scale = float32(amax) / 100`` (1 for an all-zero row), codes
ONNX QuantizeLinear of the stored scale.  The expected scales are computed here, element by element
in Python floats (a float64 quotient rounded to float32 is the float32 quotient: division rounded
twice through float64 is exact for float32), and the expected codes are
:func:`quantspec.onnx.quantize_linear` of them.
"""

from __future__ import annotations

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from quantspec import checkpoint  # noqa: E402
from quantspec.checkpoint import rules, schemes  # noqa: E402
from quantspec.checkpoint._cli import verify_main  # noqa: E402
from quantspec.checkpoint.schemes import SCHEMES, CTStorage, Scheme  # noqa: E402
from quantspec.errors import InvalidArgumentError  # noqa: E402
from quantspec.onnx import quantize_linear  # noqa: E402
from quantspec._semantics.rounding import half_away_from_zero  # noqa: E402

NAME = "test-int8-amax100"


class AmaxOver100(rules.ParamRule):
    """scale = float32(amax) / 100 per row; 1 where the row is all zeros."""

    name = "test-amax-over-100"
    text = "amax / 100"

    def compute(self, s, x):
        scale = (np.abs(x).max(axis=1) / np.float32(100)).astype(np.float32)
        return np.where(scale == 0, np.float32(1), scale).astype(np.float32), None


class TiesAway(rules.CodesRule):
    """clamp(round_half_away(x / scale), -127, 127): a codes rule no built-in scheme has."""

    name = "test-ties-away"
    text = "x / scale, ties away"

    def codes(self, codes_type, x, scale, zero_point, attrs):
        s = rules.expand(np.asarray(scale, np.float32), x, attrs)
        q = half_away_from_zero((x / s).astype(np.float32))
        return np.clip(q, -127, 127).astype(np.int8)


def _scheme(name=NAME, codes_rule=rules.ONNX, ct=None) -> Scheme:
    return Scheme(name, "int8", "channel", 0, False, AmaxOver100(), codes_rule, "float", 13,
                  "a test rule: scale = amax / 100", ct=ct)


@pytest.fixture
def registered():
    """Register the test scheme for one test (and only for it)."""
    s = schemes.register(_scheme(ct=CTStorage("int-quantized", "int", 8, "channel", True)))
    try:
        yield s
    finally:
        schemes.unregister(s.name)
    assert s.name not in SCHEMES


def _source(path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((7, 13)) * 0.3).astype(np.float32)
    a[2] = 0.0                                   # an all-zero row: scale 1
    a[4, 5] = -2.75                              # the row's amax is a negative value
    b = (rng.standard_normal((5, 33)) * 4).astype(ml_dtypes.bfloat16)
    tensors = {"model.a.weight": a, "model.b.weight": b, "model.norm.weight": np.ones(13, np.float32)}
    safetensors_numpy.save_file(tensors, str(path))
    return tensors


def _expected_scales(w: np.ndarray) -> np.ndarray:
    out = []
    for row in np.asarray(w, np.float32):
        amax = max(abs(float(v)) for v in row)
        out.append(np.float32(amax / 100.0) if amax else np.float32(1.0))
    return np.array(out, np.float32)


@pytest.mark.parametrize("fast", ["1", "0"])
def test_a_registered_scheme_converts_and_verifies(registered, tmp_path, monkeypatch, fast):
    monkeypatch.setenv("QUANTSPEC_FAST", fast)
    src, dst = tmp_path / "model.safetensors", tmp_path / "out"
    tensors = _source(src)
    report = checkpoint.convert(src, dst, NAME, progress=False)
    ck = checkpoint.open(dst)
    for name in ("model.a.weight", "model.b.weight"):
        assert report[name].scheme == NAME
        x = np.asarray(tensors[name]).astype(np.float32)
        want_scale = _expected_scales(x)
        scale, zp, attrs = ck.params(name)
        assert zp is None and attrs == {"axis": 0}
        assert scale.dtype == np.float32 and scale.tobytes() == want_scale.tobytes(), name
        want_codes = quantize_linear(x, want_scale, np.zeros(len(want_scale), np.int8), axis=0)
        codes = ck.codes(name)
        assert codes.dtype == np.int8 and codes.shape == x.shape
        assert codes.tobytes() == want_codes.tobytes(), name
        record = ck.describe(name)
        assert (record["scheme"], record["parameters"], record["codes_rule"], record["spec"]) == (
            NAME, "test-amax-over-100", "onnx", "onnx")
    assert ck.scheme("model.norm.weight") == "keep"
    assert (ck.codes("model.a.weight")[2] == 0).all() and ck.params("model.a.weight")[0][2] == 1.0

    result = checkpoint.verify(src, dst)
    assert result.ok and "identical" in result.summary(), result.table()
    assert checkpoint.verify(src, dst, params_from_dst=True).ok
    assert verify_main([str(src), str(dst)]) == 0


def test_verify_finds_a_changed_code_of_a_registered_scheme(registered, tmp_path, capsys):
    src, dst = tmp_path / "model.safetensors", tmp_path / "out"
    _source(src)
    checkpoint.convert(src, dst, NAME, progress=False)
    shard = next(dst.glob("*.safetensors"))
    header = checkpoint.open(dst)
    codes = header.codes("model.b.weight")
    data = bytearray(shard.read_bytes())
    needle = codes.tobytes()
    at = data.find(needle)
    assert at > 0
    data[at + 3] = (data[at + 3] + 1) % 256     # one code one step away
    shard.write_bytes(bytes(data))
    result = checkpoint.verify(src, dst)
    assert not result.ok and [t.name for t in result.different] == ["model.b.weight"]
    assert result["model.b.weight"].differing == 1
    assert verify_main([str(src), str(dst)]) == 1
    assert "identical" not in capsys.readouterr().out


def test_a_registered_scheme_in_a_recipe_and_the_compressed_tensors_layout(registered, tmp_path):
    src, dst = tmp_path / "model.safetensors", tmp_path / "ct"
    tensors = _source(src)
    checkpoint.convert(src, dst, recipe={"default": "int8", "rules": [{"match": "model.b.*", "scheme": NAME}]},
                       format="compressed-tensors", progress=False)
    ck = checkpoint.open(dst)
    assert ck.scheme("model.a.weight") == "int8" and ck.scheme("model.b.weight") == NAME
    # compressed-tensors keeps the scales in the model's type: bfloat16 here, and the codes are
    # those of the stored scale
    x = np.asarray(tensors["model.b.weight"]).astype(np.float32)
    stored = _expected_scales(x).astype(ml_dtypes.bfloat16)
    scale, _, attrs = ck.params("model.b.weight")
    assert np.asarray(scale).astype(np.float32).tobytes() == stored.astype(np.float32).tobytes()
    want = quantize_linear(x, stored.astype(np.float32), np.zeros(len(stored), np.int8), axis=0)
    assert ck.codes("model.b.weight").tobytes() == want.tobytes()
    assert checkpoint.verify(src, dst).ok
    assert checkpoint.verify(src, dst, params_from_dst=True).ok


def test_a_scheme_with_its_own_codes_rule(tmp_path, monkeypatch):
    """A codes rule defined here too: verify --params-from-dst finds it by the name the manifest
    records."""
    s = _scheme("test-int8-ties-away", TiesAway())
    monkeypatch.setitem(SCHEMES, s.name, s)          # registering is adding to SCHEMES
    src, dst = tmp_path / "model.safetensors", tmp_path / "out"
    tensors = _source(src)
    checkpoint.convert(src, dst, s.name, progress=False)
    ck = checkpoint.open(dst)
    x = np.asarray(tensors["model.a.weight"]).astype(np.float32)
    scale = _expected_scales(x)
    want = np.clip(half_away_from_zero(x / scale[:, None]), -127, 127).astype(np.int8)
    assert ck.codes("model.a.weight").tobytes() == want.tobytes()
    assert ck.describe("model.a.weight")["codes_rule"] == "test-ties-away"
    assert checkpoint.verify(src, dst).ok
    assert checkpoint.verify(src, dst, params_from_dst=True).ok


def test_an_unknown_scheme_is_refused_as_before(tmp_path):
    src = tmp_path / "model.safetensors"
    _source(src)
    for call in (lambda: checkpoint.convert(src, tmp_path / "out", "no-such-scheme", progress=False),
                 lambda: schemes.scheme("no-such-scheme")):
        with pytest.raises(InvalidArgumentError) as e:
            call()
        assert str(e.value) == ("scheme: must name a scheme: " + ", ".join(SCHEMES) + " (got 'no-such-scheme')")
    assert str(e.value).startswith("scheme: must name a scheme: int8, int8-tensor, uint8-asym, int4-b16, ")
    assert NAME not in SCHEMES                       # the other tests' registrations are undone
    with pytest.raises(InvalidArgumentError, match="must name a scheme"):
        checkpoint.convert(src, tmp_path / "out", NAME, progress=False)
    assert not (tmp_path / "out").exists()


def test_register_refuses_what_it_cannot_take():
    with pytest.raises(InvalidArgumentError, match="already registered"):
        schemes.register(_scheme("int8"))
    with pytest.raises(InvalidArgumentError, match="ParamRule and a CodesRule"):
        schemes.register(Scheme("test-strings", "int8", "channel", 0, False, "amax", "onnx", "float", 13, "strings"))
    with pytest.raises(InvalidArgumentError, match="built-in"):
        schemes.unregister("int8")
    assert "test-strings" not in SCHEMES and SCHEMES["int8"].params == "ort-int"
