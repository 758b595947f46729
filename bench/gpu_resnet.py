"""Issue 28's ResNet-18 row: ResNet-18 with the CIFAR stem (3x3 stride-1 first convolution, no
max-pool), 32x32 input, batch 128, BatchNorm in training mode, SGD momentum 0.9, one training
step (forward, cross_entropy, backward, update). The same weights and batch in PyTorch eager,
torch.compile(model) (default mode, the optimizer eager, as the issue measured it) and lazytensor
on lazy:cuda (its own API: the step ends at the optimizer's update, one graph), plain and under
lt.compile. Every contender timed the same way as the other rows of bench/gpu.py."""
import numpy as np
import torch

from gpu_train_rows import time_lt_training, time_torch_training


def _model(nn, F, classes=10):
    """The same network in either framework: nn/F are torch.nn and torch.nn.functional or
    lazytensor.nn and lazytensor.nn.functional (the APIs match)."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            h = self.layers(self.stem(x))
            return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))

    return ResNet18()


def setup(quick):
    """The row's weights (numpy, from a seeded torch model) and batch."""
    batch = 16 if quick else 128
    torch.manual_seed(0)
    tm = _model(torch.nn, torch.nn.functional)
    state = {k: v.detach().cpu().numpy() for k, v in tm.state_dict().items()}
    rng = np.random.default_rng(4)
    x_np = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    y_np = rng.integers(0, 10, batch).astype(np.int64)
    return state, x_np, y_np


def torch_model(state):
    m = _model(torch.nn, torch.nn.functional).cuda()
    m.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return m


def torch_step(m, fwd, x, y):
    """One training step of torch model m whose forward is fwd (m itself or torch.compile(m))."""
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def lt_step(lt, state, x_np, y_np):
    """The same step on lazy:cuda with lazytensor's API; the optimizer's update ends the graph."""
    lm = _model(lt.nn, lt.nn.functional).to("lazy:cuda")
    lm.load_state_dict({k: lt.tensor(v, device="lazy:cuda") for k, v in state.items()})
    lx, ly = lt.tensor(x_np, device="lazy:cuda"), lt.tensor(y_np, device="lazy:cuda")
    lopt = lt.optim.SGD(lm.parameters(), lr=0.01, momentum=0.9)
    lt.mark_step()

    def step():
        lopt.zero_grad(set_to_none=True)
        loss = lt.nn.functional.cross_entropy(lm(lx), ly)
        loss.backward()
        lopt.step()  # ends the step on lazy (one graph)
        return loss
    return step


def resnet18_row(lt, torch_ms, wall_ms, first_call_s, quick, repeats):
    state, x_np, y_np = setup(quick)
    row = {"workload": f"resnet18_cifar_b{len(y_np)}_train_sgd_momentum"}
    x, y = torch.from_numpy(x_np).cuda(), torch.from_numpy(y_np).cuda()
    want = time_torch_training(row, lambda: torch_model(state),
                               lambda m, fwd: torch_step(m, fwd, x, y), torch_ms, first_call_s, repeats)
    try:
        time_lt_training(lt, row, lt_step(lt, state, x_np, y_np), wall_ms, repeats, want)
    except (NotImplementedError, RuntimeError, AttributeError, TypeError, ValueError, KeyError) as e:
        row["lt_error"] = str(e).splitlines()[0]
    return row
