"""Our own versions of two of Karpathy's public character-level training scripts, written as he
wrote them but with lazytensor imported as torch (template: test_public_scripts.py):

* ng-video-lecture `gpt.py`: a char-level GPT (embeddings, masked multi-head attention with a
  `tril` buffer, ReLU feed-forward, LayerNorm, residual blocks) trained with AdamW, with the
  script's periodic `estimate_loss()` under `no_grad` / `eval()`, and `generate()` at the end;
* makemore's MLP (Bengio et al. 2003): an embedding table `C`, a tanh layer, minibatches picked
  by integer-tensor indexing `Xtr[ix]`, and manual SGD through `p.grad = None` / `p.data +=`.

Each runs on lazytensor's `cpu` and `lazy` devices with equal losses, matches torch 2.13 running
the same script (same data, batch offsets and initial weights, all from NumPy), and compiles no
new graph after its first three training steps."""
import numpy as np
import pytest
import torch

import lazytensor as lt

CHARS = "abcdefghijklmnopqrstuvwxyz .,\n"  # 30 symbols: the GPT's vocabulary


def _corpus(n=4000):
    """A Markov-chain text (sparse random transitions) so that there is something to learn."""
    rs, out = np.random.default_rng(1), [0]
    trans = rs.dirichlet(np.full(len(CHARS), 0.1), size=len(CHARS))
    for _ in range(n - 1):
        out.append(rs.choice(len(CHARS), p=trans[out[-1]]))
    return "".join(CHARS[i] for i in out)


def gpt(lib, dev, max_iters=15):
    """ng-video-lecture gpt.py, shrunk. Returns (per-step training losses, estimate_loss results,
    compiles after the third training step, generated ids)."""
    nn, F = lib.nn, lib.nn.functional
    batch_size, block_size, eval_interval, eval_iters = 4, 16, 5, 4
    learning_rate, n_embd, n_head, n_layer, dropout = 1e-2, 32, 2, 2, 0.0  # dropout 0: repeatable
    device = dev
    lib.manual_seed(1337)  # as the script does; generate()'s multinomial draws from it
    rs = np.random.default_rng(1337)  # stands in for torch's RNG where the libraries must agree

    text = _corpus()
    chars = sorted(list(set(text)))
    vocab_size, stoi = len(chars), {ch: i for i, ch in enumerate(chars)}
    encode = lambda s: [stoi[c] for c in s]  # noqa: E731

    data = lib.tensor(encode(text), dtype=lib.long, device=device)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]

    def get_batch(split):
        data = train_data if split == "train" else val_data
        ix = rs.integers(0, len(data) - block_size, (batch_size,))  # was torch.randint
        x = lib.stack([data[i:i + block_size] for i in ix])
        y = lib.stack([data[i + 1:i + block_size + 1] for i in ix])
        return x.to(device), y.to(device)

    @lib.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = lib.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch(split)
                logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    class Head(nn.Module):
        def __init__(self, head_size):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)
            self.register_buffer("tril", lib.tril(lib.ones(block_size, block_size)))
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            B, T, C = x.shape
            k, q = self.key(x), self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T) attention scores
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # causal: no future
            wei = self.dropout(F.softmax(wei, dim=-1))
            return wei @ self.value(x)

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_heads, head_size):
            super().__init__()
            self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
            self.proj = nn.Linear(head_size * num_heads, n_embd)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.dropout(self.proj(lib.cat([h(x) for h in self.heads], dim=-1)))

    class FeedFoward(nn.Module):  # sic, the script's spelling
        def __init__(self, n_embd):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.ReLU(),
                                     nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))

        def forward(self, x):
            return self.net(x)

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            head_size = n_embd // n_head
            self.sa = MultiHeadAttention(n_head, head_size)
            self.ffwd = FeedFoward(n_embd)
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)

        def forward(self, x):
            x = x + self.sa(self.ln1(x))
            x = x + self.ffwd(self.ln2(x))
            return x

    class GPTLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
            self.position_embedding_table = nn.Embedding(block_size, n_embd)
            self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size)
            self.apply(self._init_weights)

        def _init_weights(self, module):
            # The script's normal(0, 0.02) / zeros init, drawn from NumPy so all three runs agree.
            with lib.no_grad():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    w = rs.normal(0.0, 0.02, tuple(module.weight.shape)).astype(np.float32)
                    module.weight.copy_(lib.tensor(w))
                if isinstance(module, nn.Linear) and module.bias is not None:
                    module.bias.zero_()

        def forward(self, idx, targets=None):
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)
            pos_emb = self.position_embedding_table(lib.arange(T, device=device))
            x = self.ln_f(self.blocks(tok_emb + pos_emb))
            logits = self.lm_head(x)
            if targets is None:
                loss = None
            else:
                B, T, C = logits.shape
                logits = logits.view(B * T, C)
                targets = targets.view(B * T)
                loss = F.cross_entropy(logits, targets)
            return logits, loss

        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -block_size:]
                logits, loss = self(idx_cond)
                logits = logits[:, -1, :]
                probs = F.softmax(logits, dim=-1)
                idx_next = lib.multinomial(probs, num_samples=1)
                idx = lib.cat((idx, idx_next), dim=1)
            return idx

    model = GPTLanguageModel()
    m = model.to(device)
    optimizer = lib.optim.AdamW(model.parameters(), lr=learning_rate)

    step_losses, evals, compiles_at_3 = [], [], None
    for iter in range(max_iters):
        if iter % eval_interval == 0 or iter == max_iters - 1:
            losses = estimate_loss()
            evals.append((float(losses["train"]), float(losses["val"])))
            print(f"step {iter}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        xb, yb = get_batch("train")
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step_losses.append(loss.item())  # ours: the script only prints estimate_loss()
        if lib is lt and iter == 2:
            compiles_at_3 = lt.metrics.counters()["graph_compiles"]
    # Counted before generate(), a different program (its context grows a token per call; on
    # lazy all its tokens trace into one graph, read by .tolist()). The estimate_loss() calls
    # after iter 0 are counted: they reuse the forward-only graphs of the first one.
    new = lt.metrics.counters()["graph_compiles"] - compiles_at_3 if lib is lt else 0

    context = lib.zeros((1, 1), dtype=lib.long, device=device)
    generated = m.generate(context, max_new_tokens=block_size + 4)[0].tolist()
    return np.array(step_losses), np.array(evals), new, generated


def makemore_mlp(lib, dev, steps=20):
    """makemore part 2 (MLP). Returns (per-step losses, dev-set loss, compiles after step 3)."""
    F = lib.nn.functional
    rs = np.random.default_rng(2147483647)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rs.choice(letters, rs.integers(3, 9))) for _ in range(200)]  # names.txt

    chars = sorted(list(set("".join(words))))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    block_size = 3  # context length: how many characters do we take to predict the next one?

    def build_dataset(words):
        X, Y = [], []
        for w in words:
            context = [0] * block_size
            for ch in w + ".":
                ix = stoi[ch]
                X.append(context)
                Y.append(ix)
                context = context[1:] + [ix]
        return lib.tensor(X, device=dev), lib.tensor(Y, device=dev)

    n1 = int(0.8 * len(words))
    (Xtr, Ytr), (Xdev, Ydev) = build_dataset(words[:n1]), build_dataset(words[n1:])

    # was torch.randn(..., generator=g): drawn from NumPy so all three runs start equal
    def randn(*shape):
        return lib.tensor(rs.standard_normal(shape).astype(np.float32), device=dev)

    C, W1, b1, W2, b2 = randn(27, 10), randn(30, 200), randn(200), randn(200, 27), randn(27)
    parameters = [C, W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True

    lossi, compiles_at_3 = [], None
    for i in range(steps):
        ix = lib.tensor(rs.integers(0, Xtr.shape[0], (32,)), device=dev)  # was torch.randint
        emb = C[Xtr[ix]]  # (32, 3, 10)
        h = lib.tanh(emb.view(-1, 30) @ W1 + b1)  # (32, 200)
        logits = h @ W2 + b2  # (32, 27)
        loss = F.cross_entropy(logits, Ytr[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < steps // 2 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.item())
        if lib is lt and i == 2:
            compiles_at_3 = lt.metrics.counters()["graph_compiles"]
    new = lt.metrics.counters()["graph_compiles"] - compiles_at_3 if lib is lt else 0

    h = lib.tanh(C[Xdev].view(-1, 30) @ W1 + b1)  # the split's loss, at the end
    logits = h @ W2 + b2
    return np.array(lossi), F.cross_entropy(logits, Ydev).item(), new


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_gpt_script_trains_like_torch_and_stops_compiling(device):
    want, want_evals, _, _ = gpt(torch, "cpu")
    got, got_evals, new_compiles, generated = gpt(lt, device)
    if device == "lazy":  # the same script on both devices: the same losses
        np.testing.assert_allclose(got, gpt(lt, "cpu")[0], rtol=1e-4)
    # float32 rounding differs between the libraries' kernels, amplified a little by AdamW.
    np.testing.assert_allclose(got, want, rtol=2e-3)
    np.testing.assert_allclose(got_evals, want_evals, rtol=2e-3)
    assert got[-3:].mean() < got[:3].mean()  # it trains
    assert new_compiles == 0
    # multinomial's draws differ between libraries: only the shape and the ids are checked.
    assert len(generated) == 1 + 16 + 4 and all(0 <= t < len(CHARS) for t in generated)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_makemore_mlp_script_trains_like_torch_and_stops_compiling(device):
    want, want_dev, _ = makemore_mlp(torch, "cpu")
    got, got_dev, new_compiles = makemore_mlp(lt, device)
    if device == "lazy":
        np.testing.assert_allclose(got, makemore_mlp(lt, "cpu")[0], rtol=1e-4)
    np.testing.assert_allclose(got, want, rtol=2e-3)
    assert got_dev == pytest.approx(want_dev, rel=2e-3)
    assert got[-3:].mean() < got[:3].mean()
    assert new_compiles == 0
