"""lt.distributed: the default process group and its collectives, as torch.distributed names them.

Launch one process per rank with torchrun (`torchrun --nproc-per-node N script.py`), which sets
RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; `init_process_group()` reads them.
Tensors on GPUs go over NCCL (each rank on `lazy:cuda:LOCAL_RANK`, or `cuda:LOCAL_RANK`), CPU
tensors over Gloo. LT_DIST_TIMEOUT (seconds, default 300) bounds every wait: a rank that
died or never came makes the others raise RuntimeError naming the timeout, never hang.

On a `lazy` device a collective is a node of the graph: it runs at the next sync, in graph order,
so every rank must sync the same graphs in the same order (as torch.distributed requires its calls
in the same order). The collectives update their tensors in place, as torch.distributed's do.
"""
from . import _C

_D = _C.distributed


class ReduceOp:
    """torch.distributed.ReduceOp's names for all_reduce's op (strings work too)."""
    SUM = "sum"
    AVG = "avg"
    MAX = "max"


_OPS = {"sum": 0, "avg": 1, "max": 2}


def init_process_group(backend=None, **kwargs):
    """Joins the group torchrun's environment describes; returns when every rank has joined.
    backend: "nccl" (GPU tensors, on cuda:LOCAL_RANK; host tensors are staged through the GPU),
    "gloo" (CPU tensors), or None: "nccl" when lazytensor was built with CUDA and this process
    sees a GPU, else "gloo" (as torch.distributed picks)."""
    unknown = set(kwargs) - {"init_method", "timeout", "world_size", "rank"}
    if unknown:
        raise TypeError(f"init_process_group: unexpected arguments {sorted(unknown)}")
    if kwargs.get("init_method") not in (None, "env://"):
        raise NotImplementedError("not implemented: init_process_group(init_method="
                                  f"{kwargs['init_method']!r}); only the env:// method (torchrun)")
    _D.init_process_group(backend or "")


def destroy_process_group(group=None):
    _D.destroy_process_group()


def is_initialized():
    return _D.is_initialized()


def is_available():
    return True


def get_rank(group=None):
    return _D.get_rank()


def get_world_size(group=None):
    return _D.get_world_size()


def get_backend(group=None):
    """The group's engine: "nccl" (GPUs) or "gloo" (CPUs), as torch.distributed.get_backend()."""
    return _D.get_backend()


def barrier(group=None):
    """Returns once every rank has called it (a host wait; pending lazy collectives run at their
    graph's sync, in the same order on every rank)."""
    _D.barrier()


def _op(op):
    name = op.lower() if isinstance(op, str) else op
    if name not in _OPS:
        raise ValueError(f"all_reduce: op must be one of 'sum', 'avg', 'max', got {op!r}")
    return _OPS[name]


def all_reduce(tensor, op="sum", group=None, async_op=False):
    """Every rank's `tensor` combined elementwise (sum, avg or max); every rank's `tensor` gets the
    result, in place."""
    _no_async(async_op, "all_reduce")
    tensor._assign(_D.all_reduce(tensor, _op(op)))


def broadcast(tensor, src, group=None, async_op=False):
    """Rank `src`'s `tensor` into every rank's `tensor`, in place."""
    _no_async(async_op, "broadcast")
    tensor._assign(_D.broadcast(tensor, int(src)))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] gets rank r's `tensor`, in place (one tensor per rank, each of its shape)."""
    _no_async(async_op, "all_gather")
    world = get_world_size()
    if len(tensor_list) != world:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a group of "
                         f"{world} ranks")
    for r, t in enumerate(tensor_list):
        if tuple(t.shape) != tuple(tensor.shape) or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather: tensor_list[{r}] is {t.dtype} {tuple(t.shape)}, the "
                             f"tensor {tensor.dtype} {tuple(tensor.shape)}")
    stacked = _D.all_gather(tensor)
    for r, t in enumerate(tensor_list):
        t._assign(stacked[r])


def all_gather_into_tensor(output, tensor, group=None, async_op=False):
    """output ([world * n, ...], as torch's) gets the ranks' `tensor`s concatenated along dim 0."""
    _no_async(async_op, "all_gather_into_tensor")
    stacked = _D.all_gather(tensor)
    output._assign(stacked.reshape(tuple(output.shape)))


def _no_async(async_op, name):
    if async_op:
        raise NotImplementedError(f"not implemented: {name}(async_op=True); on a lazy device the "
                                  "collective already overlaps: it runs inside the graph")
