"""Numerics every op's slice shares: dtypes and their compute dtype, tensor/array views, the channel layout, the
LeakyReLU building blocks of the NumPy references and the chunked thread pool they run on. Below the backends
and the op layer: imports torch, NumPy and ml_dtypes, nothing of the package but its own modules."""
