"""``quantspec convert SRC DST --scheme NAME`` and ``quantspec verify SRC DST``: the command lines of
:func:`quantspec.checkpoint.convert` and :func:`quantspec.checkpoint.verify`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..errors import QuantSpecError

__all__ = ["main", "parser", "verify_main", "verify_parser"]


def parser() -> argparse.ArgumentParser:
    from .schemes import PRESET_SCHEMES, SCHEMES

    p = argparse.ArgumentParser(
        prog="quantspec convert",
        description="Quantize a whole checkpoint: SRC (a .safetensors file, a directory of them, a "
        "*.safetensors.index.json, an .npz or an .npy; float32, float16 and bfloat16 tensors) into DST, a "
        "directory of safetensors shards holding each tensor's codes, scale and zero point, with its own "
        "index (model.safetensors.index.json) and a manifest (quantspec.json). Tensors no rule names and "
        "tensors a scheme cannot take (1-D norms and biases, integer tensors) are kept as they were. "
        "Nothing is written under a final name until the whole checkpoint is done; an interrupted run "
        "resumes when the same command is run again. See docs/checkpoints.md.",
    )
    p.add_argument("src", metavar="SRC", help="the checkpoint to convert")
    p.add_argument("dst", metavar="DST", help="the directory to write (created; empty, or an earlier conversion)")
    p.add_argument("--scheme", metavar="NAME", help="the scheme of every tensor no recipe rule names: "
                   + ", ".join(SCHEMES) + "; or a compressed-tensors preset (any case), as llm-compressor's "
                   "model_free_ptq makes it: " + ", ".join(PRESET_SCHEMES))
    p.add_argument("--recipe", metavar="FILE", help="a TOML file: default = SCHEME and [[rules]] tables "
                   "{match = GLOB, scheme = SCHEME or \"keep\"}, first match wins")
    p.add_argument("--include", metavar="GLOB", action="append", help="quantize only tensors matching a glob "
                   "(repeatable); the others are kept")
    p.add_argument("--exclude", metavar="GLOB", action="append", help="keep tensors matching this glob (repeatable)")
    p.add_argument("--max-shard-size", metavar="SIZE", help="largest shard: 2GB, 500MiB or bytes (default 5GB)")
    p.add_argument("--format", default=None, metavar="LAYOUT", help="the output layout: quantspec (the default), or "
                   "compressed-tensors (config.json with a quantization_config, the layout vLLM and transformers "
                   "load; the default for presets)")
    p.add_argument("--dask", metavar="local:N|ADDRESS", help="run the slabs on a Dask cluster: local:N starts N worker "
                   "processes here, an address (tcp://host:8786) uses a running scheduler whose workers mount SRC "
                   "and DST at the same paths (pip install 'quantspec[dask]')")
    p.add_argument("--no-resume", action="store_true", help="recompute every shard, even those an interrupted run "
                   "finished")
    p.add_argument("--report", action="store_true", help="print a line per tensor (scheme, bytes, error)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from .converter import convert

    progress = False if args.quiet else None
    try:
        report = convert(args.src, args.dst, args.scheme, recipe=args.recipe, include=args.include,
                         exclude=args.exclude, max_shard_size=args.max_shard_size, format=args.format,
                         dask=args.dask, progress=progress, resume=not args.no_resume)
    except KeyboardInterrupt:
        print("quantspec convert: interrupted; nothing was written under a final name. Run the same command "
              "again to resume (finished shards are kept).", file=sys.stderr)
        return 130
    except QuantSpecError:
        raise
    if not args.quiet:
        if args.report:
            print(report.table())
        print(f"quantspec convert: {report.summary()}; wrote {args.dst}")
    return 0


def verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="quantspec verify",
        description="Check the quantized checkpoint DST against its float source SRC: re-derive every tensor from "
        "SRC and DST's manifest (scheme, parameters, codes, placed as DST's layout stores them) and compare bytes; "
        "with --params-from-dst take DST's stored scales and zero points as given (a checkpoint made by another "
        "tool, such as compressed-tensors) and check only that each code is what the scheme's operator gives for "
        "them. Prints, per differing tensor, the count of differing elements, the largest code difference and the "
        "first positions with their float input, expected and found codes. Exit status: 0 identical, "
        "1 differences, 2 unreadable input. A compressed-tensors checkpoint made by another tool (llm-compressor) "
        "is checked by compressed-tensors' own arithmetic (--rule compressed-tensors, its default), as are "
        "quantspec's compressed-tensors presets. See docs/checkpoints.md.",
    )
    p.add_argument("src", metavar="SRC", help="the float checkpoint DST was made from")
    p.add_argument("dst", metavar="DST", help="the quantized checkpoint (quantspec or compressed-tensors layout)")
    p.add_argument("--params-from-dst", action="store_true", help="take DST's scales and zero points as given; "
                   "check only the codes")
    p.add_argument("--rule", choices=("scheme", "quantizelinear", "compressed-tensors"), default=None,
                   help="what the codes are checked against: scheme (DST's recorded scheme of each tensor, "
                   "recomputed from SRC; the default for quantspec's own schemes), quantizelinear (ONNX QuantizeLinear "
                   "of DST's stored parameters, as --params-from-dst), compressed-tensors (compressed-tensors' "
                   "arithmetic recomputed from SRC, every tensor compared; the default for compressed-tensors "
                   "checkpoints without a quantspec manifest and for presets)")
    p.add_argument("--dask", metavar="local:N|ADDRESS", help="run the checks on a Dask cluster, as convert --dask")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    return p


def verify_main(argv: Sequence[str] | None = None) -> int:
    import json

    args = verify_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from .verify import verify

    try:
        report = verify(args.src, args.dst, params_from_dst=args.params_from_dst, rule=args.rule, dask=args.dask,
                        progress=False if args.json else None)
    except KeyboardInterrupt:
        print("quantspec verify: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        if not report.ok:
            print(report.table())
        print(f"quantspec verify: {report.summary()}")
    return 0 if report.ok else 1
