"""DistributedSampler, as torch.utils.data.distributed's: each of `num_replicas` processes iterates
its own share of the (shuffled with `seed + epoch`, padded or cut to a multiple) indices."""
import math

from ..._generator import Generator
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _process_group(what):
    try:
        from ... import distributed
        if distributed.is_initialized():
            return getattr(distributed, what)()
    except (ImportError, AttributeError):
        pass
    raise RuntimeError(f"DistributedSampler: pass {'rank' if what == 'get_rank' else 'num_replicas'}"
                       "= or initialize lazytensor.distributed's process group first")


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None:
            num_replicas = _process_group("get_world_size")
        if rank is None:
            rank = _process_group("get_rank")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = Generator().manual_seed(self.seed + self.epoch)._randperm(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            indices += (indices * math.ceil(pad / len(indices)))[:pad] if pad > 0 else []
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """A new shuffle for `epoch` (call it before each epoch's iteration, as with torch)."""
        self.epoch = epoch
