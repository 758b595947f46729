"""lazytensor: a lazy-tensor tracing runtime with PyTorch's Python API.

    import lazytensor as lt
    x = lt.randn(32, 64, device="lazy")      # operations on "lazy" are traced, not run
    y = ((x * 2).sin() + 1).relu().sum(1)
    lt.mark_step()                            # compiles the trace into fused kernels and runs it
    print(y, lt.metrics.report())

Devices: "cpu" (eager), "cuda[:N]", "lazy[:N]", "lazy:cpu", "lazy:cuda", "lazy:reference".
Reading a value (item, numpy, tolist, printing, bool) is a sync point that computes that tensor.
"""
import os as _os

# oneDNN (CPU matmul) runs on OpenMP, whose idle workers spin by default and starve the runtime's
# own thread pool that runs the fused kernels between GEMMs (an MLP step went from 0.4 to 60 ms on
# 2 cores). libgomp reads this once, when _C first loads it; a user's setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from . import _C  # noqa: E402

if "torch" in __import__("sys").modules:
    # PyTorch came first: its OpenMP runtime read the environment already and serves oneDNN's
    # GEMMs too (one libgomp per process), its threads spinning for milliseconds after each one.
    # The fused kernels then run on that same team rather than on a second pool that would
    # contend with it for the cores (backends/backend.h, cpu_share_openmp_threads).
    _C.set_cpu_share_openmp_threads(True)

if _os.environ.get("LT_SOURCE_LOCATIONS", "1") != "0":  # nodes get the user's file:line
    _C._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)))
from ._C import Tensor, device, dtype, promote_types
from ._C import (bfloat16, bool, float16, float32, float64, int8, int32, int64,  # noqa: A004
                 uint8)
from . import _tensor  # noqa: F401  (installs the Python methods onto Tensor)
from ._creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                        linspace, manual_seed, ones, ones_like, rand, rand_like, randint, randn,
                        randn_like, tensor, zeros, zeros_like)
from ._functions import *  # noqa: F401,F403  (lt.exp, lt.sum, lt.where, ...)
from ._sampling import multinomial, randperm
from ._tensor_new import roll
from . import backends, cuda, metrics, return_types
from ._sync import mark_dynamic, mark_step, set_lazy_backend, sync
from . import autograd, debug
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from . import nn, optim
from . import amp
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .compile import compile  # noqa: A004  (lt.compile, as torch.compile)
from .serialization import load, save
from ._generator import Generator
from . import utils
from . import distributed

# PyTorch's dtype aliases.
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001

__version__ = "0.1.0"


def get_default_dtype():
    return float32
