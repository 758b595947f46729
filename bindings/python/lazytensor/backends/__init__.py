"""`lazytensor.backends`: PyTorch's `torch.backends` switches that training scripts set, so such a
script runs unchanged (`lt.backends.cuda.matmul.allow_tf32 = True`).

`cuda.matmul.allow_tf32` is honoured: the CUDA backend reads it at each GEMM launch (a captured
CUDA graph is rebuilt when it changes); LT_ALLOW_TF32=1 sets it at start. `cudnn.allow_tf32` and
the other cudnn switches are stored only: lazytensor runs convolutions as cuBLAS GEMMs or
generated kernels, not through cuDNN, and those GEMMs follow `cuda.matmul.allow_tf32`.
"""
from . import cuda, cudnn

__all__ = ["cuda", "cudnn"]
