"""`lazytensor.backends`: PyTorch's `torch.backends` switches that training scripts set, so such a
script runs unchanged (`lt.backends.cuda.matmul.allow_tf32 = True`).

The flags are stored, not yet honoured: the CUDA backend does not read them. Its cuBLAS handle
decides TF32 once, when it is created, from the environment variable LT_ALLOW_TF32=1
(backends/cuda/cublas_gemm.cc), and `_C` exposes no switch to change that from Python. Set
LT_ALLOW_TF32=1 before the first CUDA matmul to get TF32 matmuls today.
"""
from . import cuda, cudnn

__all__ = ["cuda", "cudnn"]
