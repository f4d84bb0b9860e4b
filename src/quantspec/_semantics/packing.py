"""Sub-byte packing: the flat, LSB-first bit stream ONNX uses for TensorProto ``raw_data``.

Element ``i`` of a ``b``-bit type occupies bits ``[i*b, (i+1)*b)`` of a little-endian bit stream;
the stream is ``ceil(n*b/8)`` bytes, the unused high bits of the last byte are zero.  For 4-bit types
that is two elements a byte, element 0 in the low nibble; for 2-bit types four a byte; for 6-bit
types four elements in three bytes.  Packing is flat over the whole tensor in
row-major order, with no per-row padding.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pack_codes", "unpack_codes", "packed_size"]


def packed_size(n: int, bits: int) -> int:
    return (n * bits + 7) // 8


def pack_codes(codes: np.ndarray, bits: int) -> bytes:
    """Pack the low ``bits`` bits of each uint8 code (flattened, row-major)."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    n = codes.size
    mask = np.uint8((1 << bits) - 1)
    if bits == 4:
        padded = np.zeros(n + (n & 1), np.uint8)
        padded[:n] = codes & mask
        return (padded[0::2] | (padded[1::2] << 4)).tobytes()
    if bits == 2:
        padded = np.zeros(-(-n // 4) * 4, np.uint8)
        padded[:n] = codes & mask
        p = padded.reshape(-1, 4)
        return (p[:, 0] | (p[:, 1] << 2) | (p[:, 2] << 4) | (p[:, 3] << 6)).astype(np.uint8).tobytes()
    # general case (6 bits): through a bit array
    bitarr = np.unpackbits((codes & mask)[:, None], axis=1, bitorder="little")[:, :bits].reshape(-1)
    return np.packbits(bitarr, bitorder="little").tobytes()


def unpack_codes(data: bytes | bytearray | memoryview | np.ndarray, bits: int, n: int) -> np.ndarray:
    """Inverse of :func:`pack_codes`: ``n`` uint8 codes from a packed byte string."""
    raw = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
    mask = np.uint8((1 << bits) - 1)
    if bits == 4:
        out = np.empty(raw.size * 2, np.uint8)
        out[0::2] = raw & mask
        out[1::2] = raw >> 4
        return out[:n]
    if bits == 2:
        out = np.stack([(raw >> s) & mask for s in (0, 2, 4, 6)], axis=1).reshape(-1)
        return out[:n]
    bitarr = np.unpackbits(raw, bitorder="little")[: n * bits].reshape(n, bits)
    return np.packbits(bitarr, axis=1, bitorder="little").reshape(-1)
