"""Issue 28's GPT-2 rows: the whole GPT-2 124M (nanoGPT's layout: 12 layers, d 768, 12 heads,
vocabulary 50304, context 1024, tied embedding and head) in PyTorch eager, torch.compile(model)
(default mode, the optimizer eager, as the issue measured it) and lazytensor on lazy:cuda with its
own API (the step ends at the optimizer's update: one graph), plain and under lt.compile, with
the same weights and batches:

- gpt2_124m_train_row: a training step (forward, cross_entropy, backward, AdamW), B 8, T 1024,
  fp32 or under bf16 autocast (the forward inside torch.autocast / lt.autocast, backward outside);
- gpt2_124m_infer_row: the forward alone at B 1, T 1024 (no gradients), fp32 or bf16 autocast.

Every contender timed as the other rows of bench/gpu.py: torch with CUDA events per call,
lazytensor as a training loop sees it (rounds of calls, then one synchronize)."""
import contextlib
import time

import numpy as np
import torch

from gpu_gpt import gpt2_block
from gpu_train_rows import time_lt_training, time_torch_training

VOCAB, CTX, LAYERS, DIM, HEADS = 50304, 1024, 12, 768, 12


def _model(nn, F, vocab, ctx, layers, d, heads):
    """The same GPT-2 in either framework: nn/F are torch.nn and torch.nn.functional or
    lazytensor.nn and lazytensor.nn.functional (the APIs match)."""

    Block = gpt2_block(nn, F, d, heads, gelu="tanh")

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.h = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # weight tying, as GPT-2 and nanoGPT do

        def forward(self, idx, pos):
            return self.lm_head(self.ln_f(self.h(self.wte(idx) + self.wpe(pos))))

    return GPT2()


def _config(quick):
    # quick: a small model with the same structure (a smoke run of the row's code).
    return (512, 64, 2, 64, 4) if quick else (VOCAB, CTX, LAYERS, DIM, HEADS)


def _setup(quick, batch, seed):
    vocab, ctx, layers, d, heads = _config(quick)
    torch.manual_seed(0)
    tm = _model(torch.nn, torch.nn.functional, vocab, ctx, layers, d, heads)
    state = {k: v.detach().cpu().numpy() for k, v in tm.state_dict().items()}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, vocab, (batch, ctx)).astype(np.int64)
    tgt = rng.integers(0, vocab, (batch, ctx)).astype(np.int64)
    pos = np.arange(ctx, dtype=np.int64)
    return (vocab, ctx, layers, d, heads), state, idx, tgt, pos


def _amp(lt, bf16):
    if not bf16:
        return contextlib.nullcontext, contextlib.nullcontext
    return (lambda: torch.autocast("cuda", dtype=torch.bfloat16),
            lambda: lt.autocast("lazy", dtype=lt.bfloat16))


def torch_train_step(model, fwd, idx, tgt, pos, vocab, amp):
    """One torch training step of the row (cross_entropy, backward, AdamW) through `fwd` (the
    model, or torch.compile of it) under `amp`; returns the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)

    def step():
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = torch.nn.functional.cross_entropy(fwd(idx, pos).reshape(-1, vocab),
                                                     tgt.reshape(-1))
        loss.backward()
        opt.step()
        return loss
    return step


def lt_train_step(lt, cfg, idx_np, tgt_np, pos_np, amp, device="lazy:cuda", state=None):
    """The same step on lazytensor's `device` with its own API (the optimizer's step ends it: one
    graph), the weights from `state` (numpy arrays) or the model's own initialization."""
    vocab = cfg[0]
    m = _model(lt.nn, lt.nn.functional, *cfg).to(device)
    if state is not None:
        m.load_state_dict({k: lt.tensor(v, device=device) for k, v in state.items()})
    lidx, ltgt, lpos = (lt.tensor(a, device=device) for a in (idx_np, tgt_np, pos_np))
    opt = lt.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.1)
    lt.mark_step()

    def step():
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = lt.nn.functional.cross_entropy(m(lidx, lpos).reshape(-1, vocab),
                                                  ltgt.reshape(-1))
        loss.backward()
        opt.step()  # ends the step on lazy (one graph)
        return loss
    return step


def gpt2_124m_train_row(lt, torch_ms, wall_ms, first_call_s, quick, repeats, bf16):
    cfg, state, idx_np, tgt_np, pos_np = _setup(quick, 2 if quick else 8, 5)
    row = {"workload": f"gpt2_124m_train_b{idx_np.shape[0]}_t{cfg[1]}_adamw" +
                       ("_bf16_autocast" if bf16 else "_fp32")}
    torch_amp, lt_amp = _amp(lt, bf16)
    idx, tgt, pos = (torch.from_numpy(a).cuda() for a in (idx_np, tgt_np, pos_np))

    def torch_model():
        m = _model(torch.nn, torch.nn.functional, *cfg).cuda()
        m.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        return m

    def torch_step(m, fwd):
        return torch_train_step(m, fwd, idx, tgt, pos, cfg[0], torch_amp)
    want = time_torch_training(row, torch_model, torch_step, torch_ms, first_call_s, repeats)
    try:
        lt_step = lt_train_step(lt, cfg, idx_np, tgt_np, pos_np, lt_amp, state=state)
        time_lt_training(lt, row, lt_step, wall_ms, repeats, want)
    except (NotImplementedError, RuntimeError, AttributeError, TypeError, ValueError, KeyError) as e:
        row["lt_error"] = str(e).splitlines()[0]
    return row


def gpt2_124m_infer_row(lt, torch_ms, wall_ms, first_call_s, quick, repeats, bf16=False):
    cfg, state, idx_np, _, pos_np = _setup(quick, 1, 6)
    row = {"workload": f"gpt2_124m_infer_b1_t{cfg[1]}" + ("_bf16_autocast" if bf16 else "_fp32")}
    torch_amp, lt_amp = _amp(lt, bf16)
    idx, pos = torch.from_numpy(idx_np).cuda(), torch.from_numpy(pos_np).cuda()
    m = _model(torch.nn, torch.nn.functional, *cfg).cuda().eval()
    m.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})

    def torch_fwd(fwd):
        def run():
            with torch.no_grad(), torch_amp():
                return fwd(idx, pos)
        return run
    run = torch_fwd(m)
    want = run().float().cpu().numpy()
    for _ in range(3):
        run()
    row["eager_ms"] = torch_ms(run, repeats)
    torch._dynamo.reset()
    crun = torch_fwd(torch.compile(m))
    row["compile_first_s"] = first_call_s(crun)
    for _ in range(3):
        crun()
    row["compile_ms"] = torch_ms(crun, repeats)
    try:
        lm = _model(lt.nn, lt.nn.functional, *cfg).to("lazy:cuda").eval()
        lm.load_state_dict({k: lt.tensor(v, device="lazy:cuda") for k, v in state.items()})
        lidx, lpos = lt.tensor(idx_np, device="lazy:cuda"), lt.tensor(pos_np, device="lazy:cuda")
        lt.mark_step()

        def lt_run():
            with lt.no_grad(), lt_amp():
                out = lm(lidx, lpos)
            lt.mark_step()  # the forward: one graph
            return out
        t0 = time.perf_counter()
        first = lt_run().float().numpy()
        row["lt_first_s"] = time.perf_counter() - t0
        row["max_abs_err_vs_torch"] = float(np.max(np.abs(first - want)))
        row["logit_scale"] = float(np.max(np.abs(want)))
        for _ in range(3):
            lt_run()
        row["lt_ms"] = wall_ms(lt_run, repeats)
        row["lt_kernels"] = lt.metrics.last_graph()["kernels"]
        # Runs so far whose kernels went to the GPU as one CUDA graph (0: every launch plain).
        row["lt_cuda_graph_launches"] = lt.metrics.counters().get("cuda_graph_launches", 0)
        compiled = lt.compile(lt_run)
        for _ in range(3):
            compiled()
        row["lt_compile_ms"] = wall_ms(compiled, repeats)
    except (NotImplementedError, RuntimeError, AttributeError, TypeError, ValueError, KeyError) as e:
        row["lt_error"] = str(e).splitlines()[0]
    return row
