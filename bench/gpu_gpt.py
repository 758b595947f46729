"""ANCHORS' GPT rows: 4 GPT-2-small blocks (d 768, 12 heads, T 512, B 8), forward + backward, in
PyTorch eager, torch.compile and lazytensor lazy:cuda with the same weights and input: in fp32
(gpt_blocks_row) and the same under bf16 autocast (gpt_blocks_bf16_row: the forward inside
torch.autocast("cuda", bfloat16) / lt.autocast("lazy", bfloat16), backward outside, as usual)."""
import contextlib
import time

import numpy as np
import torch


def gpt2_block(nn, F, d, heads, gelu="none"):
    """The GPT-2 block class (pre-norm causal self-attention and MLP) in either framework: nn/F
    are torch.nn and torch.nn.functional or lazytensor.nn and lazytensor.nn.functional (the APIs
    match). `gelu`: F.gelu's approximate ("tanh" is GPT-2's own)."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.reshape(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate=gelu))
    return Block


def _model(nn, F, d, heads, n_blocks):
    """The same GPT-2 blocks in either framework (gpt2_block)."""
    Block = gpt2_block(nn, F, d, heads)
    return nn.Sequential(*[Block() for _ in range(n_blocks)])


def _torch_model(d, heads, n_blocks):
    return _model(torch.nn, torch.nn.functional, d, heads, n_blocks)


def _lt_model(lt, d, heads, n_blocks):
    return _model(lt.nn, lt.nn.functional, d, heads, n_blocks)


def gpt_blocks_row(lt, cuda_ms, wall_ms, first_call_s, quick, repeats):
    return _gpt_row(lt, cuda_ms, wall_ms, first_call_s, quick, repeats, bf16=False)


def gpt_blocks_bf16_row(lt, cuda_ms, wall_ms, first_call_s, quick, repeats):
    """ANCHORS' "same, bf16 autocast" row."""
    return _gpt_row(lt, cuda_ms, wall_ms, first_call_s, quick, repeats, bf16=True)


def _gpt_row(lt, cuda_ms, wall_ms, first_call_s, quick, repeats, bf16):
    d, heads, n_blocks, T, B = (128, 4, 2, 64, 2) if quick else (768, 12, 4, 512, 8)
    suffix = "_bf16_autocast" if bf16 else ""
    row = {"workload": f"gpt2_blocks{n_blocks}_d{d}_T{T}_B{B}_fwd_bwd{suffix}"}
    torch_amp = contextlib.nullcontext
    if bf16:
        torch_amp = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    lt_amp = (lambda: lt.autocast("lazy", dtype=lt.bfloat16)) if bf16 else contextlib.nullcontext
    torch.manual_seed(0)
    tm = _torch_model(d, heads, n_blocks).cuda()
    state = {k: v.detach().cpu().numpy() for k, v in tm.state_dict().items()}
    x_np = np.random.default_rng(3).standard_normal((B, T, d)).astype(np.float32)
    x = torch.from_numpy(x_np).cuda()

    def torch_step(m):
        def step():
            m.zero_grad(set_to_none=True)
            with torch_amp():
                loss = m(x).square().mean()
            loss.backward()
            return loss
        return step
    step = torch_step(tm)
    for _ in range(3):
        step()
    row["eager_ms"] = cuda_ms(step, repeats)
    want = float(step().item())
    torch._dynamo.reset()
    cstep = torch.compile(torch_step(tm))
    row["compile_first_s"] = first_call_s(cstep)
    for _ in range(3):
        cstep()
    row["compile_ms"] = cuda_ms(cstep, repeats)
    try:
        lm = _lt_model(lt, d, heads, n_blocks).to("lazy:cuda")
        lm.load_state_dict({k: lt.tensor(v, device="lazy:cuda") for k, v in state.items()})
        lx = lt.tensor(x_np, device="lazy:cuda")
        lt.mark_step()

        def lt_step():
            lm.zero_grad(set_to_none=True)
            with lt_amp():
                loss = lm(lx).square().mean()
            loss.backward()
            lt.mark_step()  # forward + backward: one graph
            return loss
        t0 = time.perf_counter()
        first = lt_step()
        lt.cuda.synchronize()
        row["lt_first_s"] = time.perf_counter() - t0
        row["lt_first_compile_ms"] = lt.metrics.last_graph()["compile_ms"]  # lowering + NVRTC
        for _ in range(3):
            lt_step()
        row["lt_ms"] = wall_ms(lt_step, max(repeats, 9), rounds=3)
        # The same step under lt.compile, the peer of torch.compile: captured once, then replayed
        # without re-running the Python code (no tracing or hashing on the host).
        compiled = lt.compile(lt_step)
        for _ in range(3):
            compiled()
        row["lt_compile_ms"] = wall_ms(compiled, max(repeats, 9), rounds=3)
        row["max_abs_err_vs_torch"] = abs(float(first.item()) - want)
        row["lt_backend"] = lt.metrics.last_graph()["backend"]
        row["lt_kernels"] = lt.metrics.last_graph()["kernels"]
    except (NotImplementedError, RuntimeError, AttributeError, TypeError, ValueError, KeyError) as e:
        row["lt_error"] = str(e).splitlines()[0]
    return row
