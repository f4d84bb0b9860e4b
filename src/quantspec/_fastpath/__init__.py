"""The fast path's machinery: whether the numba kernels run and where they are cached (``jit``), the
numba primitives (``nbprim``), the generic element-wise kernel (``fast``, ``fastmap``, ``fastpack``),
plan caches, and quantspec's worker threads (``pool``, ``threads``)."""
