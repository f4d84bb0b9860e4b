"""LiteRT int8 kernels (filled in by issue 4)."""
