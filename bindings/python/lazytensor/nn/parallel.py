"""`lt.nn.parallel`, the import path PyTorch scripts use (nanoGPT:
`from torch.nn.parallel import DistributedDataParallel as DDP`).

DataParallel on the one device lazytensor runs a module on is the module itself, wrapped as
PyTorch wraps it (its state_dict keys gain "module."). DistributedDataParallel needs a process
group (lt.distributed.init_process_group, under torchrun); without one, as in PyTorch,
constructing it is an error.
"""
from .module import Module


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if device_ids is not None and len(device_ids) > 1:
            raise NotImplementedError("not implemented: DataParallel over several devices in "
                                      "lazytensor (one device: pass device_ids=None)")
        self.module = module
        self.dim = dim

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class DistributedDataParallel(Module):
    """Data parallelism over the default process group (lt.distributed), as torch's DDP: the
    parameters and buffers start as rank 0's; after each backward pass through this module's
    forward the gradients are averaged over the ranks, in buckets of about bucket_cap_mb in
    reverse parameter order (the order backward produces them): each bucket one engine call, over
    its gradients flattened on NCCL, packed by the backend on Gloo (LT_DDP_REDUCE=flat|per_tensor|
    mixed|bucket chooses another way: runtime/distributed.h). On
    "lazy" the averaging is part of the step's graph (traced right after the backward), so forward,
    backward, the collectives and the optimizer's update are one compiled graph. `no_sync()` skips
    the averaging (gradient accumulation)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        from .. import distributed as dist
        from ..autograd import no_grad
        if not dist.is_initialized():
            raise ValueError("Default process group has not been initialized, please make sure to "
                             "call init_process_group.")
        self.module = module
        self._dist = dist
        self._sync = True
        self._queued = False  # an averaging waits in autograd's queue
        params = [p for p in module.parameters() if p.requires_grad]
        with no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t, 0)
        # Buckets in reverse order, each at most bucket_cap_mb (a parameter larger than that alone).
        cap = max(1, int(bucket_cap_mb * 1024 * 1024))
        self._buckets, bucket, size = [], [], 0
        for p in reversed(params):
            nbytes = p.numel() * p.element_size()
            if bucket and size + nbytes > cap:
                self._buckets.append(bucket)
                bucket, size = [], 0
            bucket.append(p)
            size += nbytes
        if bucket:
            self._buckets.append(bucket)

    def forward(self, *args, **kwargs):
        from ..autograd import _queue_callback, is_grad_enabled
        if self._sync and is_grad_enabled() and self._buckets and not self._queued:
            _queue_callback(_Averaging(self))  # once per backward, however many forwards
        return self.module(*args, **kwargs)

    def no_sync(self):
        """Within it, backward passes accumulate local gradients only (as torch's no_sync)."""
        ddp = self

        class _NoSync:
            def __enter__(self):
                self._prev, ddp._sync = ddp._sync, False

            def __exit__(self, *exc):
                ddp._sync = self._prev
                return False

        return _NoSync()


class _Averaging:
    """DDP's averaging, queued for the next backward pass: in C++ (nn/data_parallel.h, shared with
    lt::nn::DistributedDataParallel; the ~600 ops a GPT-2 step's averaging traces cost ~1.5 ms a
    step in Python). The mark on the module clears when the queue lets go of it, whether it ran or
    a failed backward dropped it (as the C++ wrapper's)."""

    def __init__(self, ddp):
        self._ddp = ddp
        ddp._queued = True

    def __call__(self):
        from .._C import distributed as _D
        _D.average_gradients(self._ddp._buckets)

    def __del__(self):
        self._ddp._queued = False


__all__ = ["DataParallel", "DistributedDataParallel"]
