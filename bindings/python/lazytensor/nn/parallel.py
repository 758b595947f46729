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
        if self._sync and is_grad_enabled() and self._buckets:
            _queue_callback(self._average_gradients)
        return self.module(*args, **kwargs)

    def _average_gradients(self):
        from .._C import distributed as _D
        from ..autograd import no_grad
        mode = _D.ddp_reduce_mode()  # runtime/distributed.h: by engine, or LT_DDP_REDUCE
        avg = self._dist._op("avg")
        group = 0  # bucket mode: each bucket and dtype its own call group, 1, 2, ...
        with no_grad():
            for bucket in self._buckets:
                grads = [p.grad for p in bucket if p.grad is not None]
                by_dtype = {}
                for g in grads:
                    by_dtype.setdefault(g.dtype, []).append(g)
                for grads_of_dtype in by_dtype.values():
                    # Every result before any assignment: one gradient tensor may be several
                    # parameters'.
                    group += 1
                    for g, a in _averaged(_D, grads_of_dtype, mode, avg, group):
                        g._assign(a)

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


def _averaged(_D, grads, mode, avg, group=0):
    """(gradient, its average over the ranks) for each of `grads` (one dtype, in order): each alone
    (per_tensor; mixed: those of at least DDP_ALONE_ELEMENTS; bucket: tagged with call group
    `group`), the rest flattened into one all_reduce and sliced back."""
    from .. import cat
    if mode == "bucket":
        return [(g, _D.all_reduce(g, avg, group)) for g in grads]
    alone = [mode == "per_tensor" or (mode == "mixed" and g.numel() >= _D.DDP_ALONE_ELEMENTS)
             for g in grads]
    rest = [g for g, a in zip(grads, alone) if not a]
    if len(rest) == 1:
        alone = [True] * len(grads)
    out = [(g, _D.all_reduce(g, avg)) for g, a in zip(grads, alone) if a]
    if len(rest) > 1:
        flat = _D.all_reduce(cat([g.reshape(-1) for g in rest]), avg)
        offset = 0
        for g in rest:
            n = g.numel()
            out.append((g, flat[offset:offset + n].reshape(tuple(g.shape))))
            offset += n
    return out


__all__ = ["DataParallel", "DistributedDataParallel"]
