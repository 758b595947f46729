"""lt.nn.parallel: the import path PyTorch scripts use, with PyTorch's behaviour on one process."""
import numpy as np
import pytest
import torch

import lazytensor as lt


def test_nn_parallel_import_path_as_in_pytorch():
    # nanoGPT's import; DataParallel on one device is the module, wrapped; DDP without a process
    # group is PyTorch's error.
    from lazytensor.nn.parallel import DataParallel, DistributedDataParallel as DDP
    rng = np.random.default_rng(4)
    lin = lt.nn.Linear(3, 2)
    x = lt.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    dp = DataParallel(lin)
    np.testing.assert_allclose(dp(x).numpy(), lin(x).numpy())
    assert list(dp.state_dict()) == ["module." + k for k in lin.state_dict()]
    with pytest.raises(ValueError, match="process group"):
        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 2))
    with pytest.raises(ValueError, match="process group"):
        DDP(lin)
