"""Our own versions of pytorch/examples mnist/main.py and vae/main.py, written as their authors
wrote them with lazytensor imported as torch, shrunk to run in seconds. Each runs with torch 2.13
(the oracle) and with lazytensor on "cpu" and "lazy", from the same NumPy data and initial weights
(copied from NumPy arrays). Checked: per-step training losses, the test phase's numbers, and that
after the first 3 training steps lazytensor compiles no new graph while training (across epochs,
StepLR's lr change and fresh random draws).

torch's and lazytensor's random streams differ, so the runs compared with torch take randomness
out (MNIST's dropouts get p=0; the VAE's eps comes from NumPy). The scripts' own randomness
(dropout 0.25/0.5, `randn_like`) runs on lazytensor only: seeded alike, cpu and lazy must agree."""
import numpy as np
import pytest
import torch

import lazytensor as lt

# 48 training and 24 test images, batches of 8: no partial last batch, so one step shape.
MNIST_TRAIN, MNIST_TEST, MNIST_BATCH, MNIST_EPOCHS = 48, 24, 8, 2
# The VAE: 64 pixels -> 32 hidden -> 8 latent; 64 training and 32 test rows in batches of 16.
VAE_TRAIN, VAE_TEST, VAE_BATCH, VAE_EPOCHS = 64, 32, 16, 2


def _compiles(lib):  # lazytensor's graph compiles so far (torch: none)
    return lt.metrics.counters()["graph_compiles"] if lib is lt else 0


def _init_from_numpy(lib, model, dev, seed):
    """Overwrites every parameter with a NumPy draw (fan-in scaled), the same in every library."""
    rs = np.random.default_rng(seed)
    with lib.no_grad():
        for _, p in model.named_parameters():
            shape = tuple(p.shape)
            bound = 1.0 / np.sqrt(np.prod(shape[1:])) if len(shape) > 1 else 0.1
            p.copy_(lib.tensor(rs.uniform(-bound, bound, shape).astype("float32")).to(dev))


def mnist(lib, dev, dropout=(0.0, 0.0)):
    """mnist/main.py: Net, train(), test(), Adadelta(lr=1.0) with StepLR(step_size=1, gamma=0.7)
    stepped per epoch. Returns the per-step losses, the test phase's (loss, correct) per epoch and
    the graphs compiled by training steps after the third."""
    nn, F = lib.nn, lib.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(dropout[0])
            self.dropout2 = nn.Dropout(dropout[1])
            self.fc1 = nn.Linear(8 * 5 * 5, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = lib.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    rs = np.random.default_rng(1)
    def dataset(n):  # stands in for datasets.MNIST(..., transform=Normalize((0.1307,), (0.3081,)))
        # Learnable: a bright 3x3 patch whose place says the label, on faint noise.
        labels = rs.integers(0, 10, n)
        images = 0.3 * rs.random((n, 1, 14, 14))
        for i, k in enumerate(labels):
            r, c = 2 + 6 * (k // 5), [0, 3, 6, 9, 11][k % 5]
            images[i, 0, r:r + 3, c:c + 3] = 1.0
        images = ((images - 0.1307) / 0.3081).astype("float32")
        return lib.utils.data.TensorDataset(lib.tensor(images), lib.tensor(labels))
    loader = lambda n: lib.utils.data.DataLoader(dataset(n), batch_size=MNIST_BATCH, shuffle=False)
    train_loader, test_loader = loader(MNIST_TRAIN), loader(MNIST_TEST)

    losses, step_compiles = [], []

    def train(model, device, train_loader, optimizer, epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            before = _compiles(lib)
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())  # the script prints it every log_interval; we keep all
            step_compiles.append(_compiles(lib) - before)

    def test(model, device, test_loader):
        model.eval()
        test_loss = 0
        correct = 0
        with lib.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
                pred = output.argmax(dim=1, keepdim=True)  # index of the max log-probability
                correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        return test_loss, correct

    model = Net().to(dev)
    _init_from_numpy(lib, model, dev, seed=2)
    optimizer = lib.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = lib.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    tests = []
    for epoch in range(1, MNIST_EPOCHS + 1):
        train(model, dev, train_loader, optimizer, epoch)
        tests.append(test(model, dev, test_loader))
        scheduler.step()
    return np.array(losses), np.array(tests), sum(step_compiles[3:])


def vae(lib, dev, noise="numpy"):
    """vae/main.py: VAE, loss_function (BCE + KLD), Adam(lr=1e-3), train() and test(). With
    noise="numpy" the eps of `reparameterize` comes from NumPy (shared with torch); with "lib" it is
    the script's `randn_like(std)`. Returns the per-step losses, the per-epoch test losses and the
    graphs compiled by training steps after the third."""
    nn, F = lib.nn, lib.nn.functional
    noise_rs = np.random.default_rng(3)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(64, 32)
            self.fc21 = nn.Linear(32, 8)
            self.fc22 = nn.Linear(32, 8)
            self.fc3 = nn.Linear(8, 32)
            self.fc4 = nn.Linear(32, 64)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = lib.exp(0.5 * logvar)
            if noise == "numpy":
                eps = lib.tensor(noise_rs.standard_normal(tuple(std.shape)).astype("float32"))
                eps = eps.to(std.device)
            else:
                eps = lib.randn_like(std)
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return lib.sigmoid(self.fc4(h3))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, 64))
            z = self.reparameterize(mu, logvar)
            return self.decode(z), mu, logvar

    # Reconstruction + KL divergence losses summed over all elements and batch
    def loss_function(recon_x, x, mu, logvar):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction='sum')
        KLD = -0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return BCE + KLD

    rs = np.random.default_rng(4)
    def dataset(n):  # standing in for MNIST images through ToTensor(): values in [0, 1]
        return lib.utils.data.TensorDataset(lib.tensor(rs.random((n, 1, 8, 8)).astype("float32")),
                                            lib.tensor(rs.integers(0, 10, n)))
    loader = lambda n: lib.utils.data.DataLoader(dataset(n), batch_size=VAE_BATCH, shuffle=False)
    train_loader, test_loader = loader(VAE_TRAIN), loader(VAE_TEST)

    model = VAE().to(dev)
    _init_from_numpy(lib, model, dev, seed=5)
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3)
    losses, step_compiles, test_losses = [], [], []

    def train(epoch):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(train_loader):
            before = _compiles(lib)
            data = data.to(dev)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            losses.append(loss.item() / len(data))
            step_compiles.append(_compiles(lib) - before)

    def test(epoch):
        model.eval()
        test_loss = 0
        with lib.no_grad():
            for i, (data, _) in enumerate(test_loader):
                data = data.to(dev)
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
        test_losses.append(test_loss / len(test_loader.dataset))

    for epoch in range(1, VAE_EPOCHS + 1):
        train(epoch)
        test(epoch)
    return np.array(losses), np.array(test_losses), sum(step_compiles[3:])


OTHER = {"cpu": "lazy", "lazy": "cpu"}


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_mnist_script_trains_like_torch_and_stops_compiling(device):
    want, want_tests, _ = mnist(torch, "cpu")
    got, got_tests, new_compiles = mnist(lt, device)
    other, other_tests, _ = mnist(lt, OTHER[device])
    assert len(got) == MNIST_EPOCHS * MNIST_TRAIN // MNIST_BATCH
    np.testing.assert_allclose(got, other, rtol=1e-4, atol=1e-6)  # cpu == lazy
    np.testing.assert_allclose(got_tests, other_tests, rtol=1e-4)
    # float32 kernels differ from torch's (convolution and GEMM summation order) by ~1e-6.
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(got_tests[:, 0], want_tests[:, 0], rtol=2e-3)  # test loss
    np.testing.assert_array_equal(got_tests[:, 1], want_tests[:, 1])  # correct count
    assert got_tests[-1, 1] > 2 * MNIST_TEST / 10  # it learns (chance is 1 in 10)
    # The epoch change and StepLR's new lr must not make a new training graph.
    assert new_compiles == 0


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_mnist_script_with_dropout_is_device_independent_and_stops_compiling(device):
    """The script's dropout (0.25, 0.5), lazytensor only; seeded alike, cpu and lazy agree."""
    lt.manual_seed(0)
    got, got_tests, new_compiles = mnist(lt, device, dropout=(0.25, 0.5))
    lt.manual_seed(0)
    other, other_tests, _ = mnist(lt, OTHER[device], dropout=(0.25, 0.5))
    np.testing.assert_allclose(got, other, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got_tests, other_tests, rtol=1e-4)
    assert len(set(got.round(6))) == len(got)  # masks change per step (no constant-folded seed)
    assert new_compiles == 0  # ... and a new mask is a run-time input, not a new graph


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_vae_script_trains_like_torch_and_stops_compiling(device):
    want, want_tests, _ = vae(torch, "cpu")
    got, got_tests, new_compiles = vae(lt, device)
    other, other_tests, _ = vae(lt, OTHER[device])
    assert len(got) == VAE_EPOCHS * VAE_TRAIN // VAE_BATCH
    np.testing.assert_allclose(got, other, rtol=1e-4)  # cpu == lazy
    np.testing.assert_allclose(got_tests, other_tests, rtol=1e-4)
    np.testing.assert_allclose(got, want, rtol=2e-3)
    np.testing.assert_allclose(got_tests, want_tests, rtol=2e-3)
    assert got[-1] < got[0] and got_tests[-1] < got_tests[0]  # it trains
    assert new_compiles == 0


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_vae_script_with_randn_like_is_device_independent_and_stops_compiling(device):
    """The script's own `randn_like(std)`, lazytensor only; seeded alike, cpu and lazy agree."""
    lt.manual_seed(0)
    got, got_tests, new_compiles = vae(lt, device, noise="lib")
    lt.manual_seed(0)
    other, other_tests, _ = vae(lt, OTHER[device], noise="lib")
    np.testing.assert_allclose(got, other, rtol=1e-4)
    np.testing.assert_allclose(got_tests, other_tests, rtol=1e-4)
    assert new_compiles == 0
