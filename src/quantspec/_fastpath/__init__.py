"""The fast path's machinery: whether the numba kernels run and where they are cached (``jit``), the
numba primitives (``nbprim``), the generic element-wise kernel (``fastmap``, ``fastpack``) and how a
call runs it (``runner``: work items, threads, streaming stores), plan caches (``plancache``), and
quantspec's worker threads (``pool``, ``threads``)."""
