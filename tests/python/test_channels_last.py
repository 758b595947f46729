"""Channels-last convolution data (LT_CHANNELS_LAST, lowering/channels_last.h): a residual CNN
trained on lazy with the pass turned on (LT_CHANNELS_LAST=1; off by default) learns what
PyTorch learns, and its step graph keeps the data between convolutions NHWC. The variable is read
once per process, so each setting runs in a process of its own."""
import json
import os
import subprocess
import sys

import numpy as np
import torch

# The model once, for both frameworks: executed with `nn` and `F` bound to torch's or lazytensor's.
MODEL = r"""
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + x)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.block = Block(8)
        self.down = nn.Conv2d(8, 12, 3, stride=2, padding=1)
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        h = self.block(F.relu(self.bn(self.stem(x))))
        h = F.relu(self.down(h))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))
"""

SCRIPT = r"""
import json, sys
import numpy as np
import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F
""" + MODEL + r"""
state = {k: np.asarray(v, dtype) for k, (v, dtype) in json.loads(sys.stdin.read()).items()}
rng = np.random.default_rng(3)
x = lt.tensor(rng.standard_normal((6, 3, 10, 9)).astype(np.float32), device="lazy")
y = lt.tensor(rng.integers(0, 5, 6), device="lazy")
model = Net()
model.load_state_dict({k: lt.tensor(v) for k, v in state.items()})
model.to("lazy")
opt = lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
lt.mark_step()
losses = []
for _ in range(4):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
grouping = lt.metrics.last_graph()["grouping"]
line = next((l for l in grouping.splitlines() if l.startswith("channels-last:")), "")
print(json.dumps({"losses": losses, "channels_last": line,
                  "params": {k: v.cpu().numpy().tolist() for k, v in model.state_dict().items()}}))
"""


def _torch_net():
    scope = {"nn": torch.nn, "F": torch.nn.functional}
    exec(MODEL, scope)
    return scope["Net"]()


def _run(setting, state):
    env = dict(os.environ, LT_CHANNELS_LAST=setting, LT_CACHE_DIR="off")
    out = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps(state), env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_residual_cnn_trains_as_pytorch_with_channels_last_data():
    torch.manual_seed(0)
    net = _torch_net()
    state = {k: (v.detach().numpy().tolist(), str(v.dtype).replace("torch.", ""))
             for k, v in net.state_dict().items()}
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal((6, 3, 10, 9)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 5, 6))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    want = []
    for _ in range(4):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())

    on, off = _run("1", state), _run("0", state)
    # The pass ran: the block's convolutions and their gradients read and write NHWC buffers, and
    # elementwise kernels between them iterate in NHWC order.
    assert on["channels_last"].startswith("channels-last: "), on["channels_last"]
    counts = on["channels_last"].split(":")[1].split(",")
    assert int(counts[0].split()[0]) >= 4 and int(counts[1].split()[0]) >= 3, on["channels_last"]
    assert int(counts[2].split()[0]) >= 1, on["channels_last"]
    assert int(counts[3].split()[0]) >= 3, on["channels_last"]  # weight copies OIHW <-> OHWI
    assert off["channels_last"] == ""
    np.testing.assert_allclose(on["losses"], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(on["losses"], off["losses"], rtol=1e-5, atol=1e-6)
    for k, v in net.state_dict().items():
        if k.endswith("num_batches_tracked"):
            continue
        np.testing.assert_allclose(np.asarray(on["params"][k]), v.numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=k)
