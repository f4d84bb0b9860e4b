"""LiteRT int8 kernels: one module per kernel family, each registering its kernels.

``OPS`` maps a builtin operator name (``"FULLY_CONNECTED"``, ...) to its kernel (see
:mod:`.base` for the prepare/compute interface).  Every module of this package other than ``base``
is a kernel family; importing them here fills the registry.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import REGISTRY, Kernel, TensorSpec, activation_range, register

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name not in ("base",) and not _info.name.startswith("_"):
        importlib.import_module(f".{_info.name}", __name__)

OPS = REGISTRY

__all__ = ["OPS", "Kernel", "TensorSpec", "activation_range", "register"]
