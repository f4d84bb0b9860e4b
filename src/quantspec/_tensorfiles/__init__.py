"""Tensor files: reading and writing .npy / .npz / .safetensors (``tensorio``), computing large
tensors a slab at a time while they are written (``slabs``), and clean-up on SIGTERM / SIGHUP
(``termination``)."""
