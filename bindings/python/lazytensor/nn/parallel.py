"""`lt.nn.parallel`, the import path PyTorch scripts use (nanoGPT:
`from torch.nn.parallel import DistributedDataParallel as DDP`).

DataParallel on the one device lazytensor runs a module on is the module itself, wrapped as
PyTorch wraps it (its state_dict keys gain "module."). DistributedDataParallel needs a process
group; lazytensor has no lt.distributed yet (the data-parallel issue), so, as in PyTorch without
init_process_group, constructing one is an error; scripts that wrap only when launched by torchrun
run unchanged on one process.
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
    def __init__(self, module, *args, **kwargs):
        super().__init__()
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call init_process_group. (lazytensor has no lt.distributed yet: "
                         "not implemented: DistributedDataParallel on lazytensor)")


__all__ = ["DataParallel", "DistributedDataParallel"]
