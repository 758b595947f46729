"""`lazytensor.backends.cudnn`: the switches scripts set on torch.backends.cudnn, with PyTorch's
defaults. lazytensor does not use cuDNN (convolutions are cuBLAS calls or generated kernels), so
these are stored only and change nothing; `allow_tf32` is not read by the CUDA backend yet
(see lazytensor.backends)."""

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available"]

allow_tf32 = True
benchmark = False
deterministic = False
enabled = True


def is_available():
    """False: lazytensor has no cuDNN backend."""
    return False
