"""`lazytensor.backends.cudnn`: the switches scripts set on torch.backends.cudnn, with PyTorch's
defaults. lazytensor does not use cuDNN (convolutions are cuBLAS calls or generated kernels, which
follow lazytensor.backends.cuda.matmul.allow_tf32), so these are stored only and change nothing."""

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available"]

allow_tf32 = True
benchmark = False
deterministic = False
enabled = True


def is_available():
    """False: lazytensor has no cuDNN backend."""
    return False
