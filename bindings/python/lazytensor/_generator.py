"""`lt.Generator`: a seedable source of random numbers for host-side sampling (DataLoader shuffling,
samplers, random_split), as torch.Generator is for them: `generator=lt.Generator().manual_seed(42)`
makes an order reproducible without touching the global seed.

It wraps a NumPy PCG64 bit generator; device random ops (`lt.rand` and friends) use the global
counter-based generator that `lt.manual_seed` seeds, and do not take a Generator yet.
"""
import numpy as np

from . import _C

__all__ = ["Generator", "default_seed"]


class Generator:
    def __init__(self, device="cpu"):
        self.device = _C.device(str(device))
        self.seed()

    def manual_seed(self, seed):
        """Seeds this generator; returns it, so `Generator().manual_seed(0)` is one expression."""
        self._initial_seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self._rng = np.random.Generator(np.random.PCG64(self._initial_seed))
        return self

    def seed(self):
        """Seeds from the operating system's entropy; returns the seed."""
        self.manual_seed(int(np.random.SeedSequence().generate_state(1, np.uint64)[0]))
        return self._initial_seed

    def initial_seed(self):
        return self._initial_seed

    def get_state(self):
        return dict(self._rng.bit_generator.state)

    def set_state(self, state):
        self._rng.bit_generator.state = state
        return self

    # ---- used by lazytensor.utils.data ---------------------------------------------------------

    def _randperm(self, n):
        return self._rng.permutation(n)

    def _integers(self, high, size):
        return self._rng.integers(0, high, size=size, dtype=np.int64)

    def _random_seed(self):
        return int(self._rng.integers(0, 2**63 - 1, dtype=np.int64))


def default_seed(generator=None):
    """A 63-bit seed from `generator`, or from the global generator (`lt.manual_seed` fixes it),
    as PyTorch's samplers and DataLoader draw one from torch's default generator."""
    if generator is not None:
        if not isinstance(generator, Generator):
            raise TypeError(f"generator must be a lazytensor.Generator, got {type(generator).__name__}")
        return generator._random_seed()
    return int(_C.randint(0, 2**62, [], _C.int64, _C.device("cpu")).item())
