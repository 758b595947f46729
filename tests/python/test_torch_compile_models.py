"""torch.compile(model, backend="lazytensor") on whole models, trained as users write them, against
the same model in PyTorch eager (torch 2.13, CPU) as the oracle: losses within 1e-4 relative over
20 steps, gradients and BatchNorm's running statistics equal, one lazytensor compile per graph.

Each test prints its graph-break and fallback counts (pytest -s shows them)."""
import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazytensor as lt
import lazytensor.torch  # noqa: F401  (registers the backend)
from torch_env import allow_torchvision_import, import_timm
from torch_models import GPT

allow_torchvision_import()  # transformers and timm import torchvision (torch_env.py says why)

STEPS = 20
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


def _loss_of(out):
    if hasattr(out, "loss"):
        return out.loss
    return out if out.ndim == 0 else out.float().pow(2).mean()


def train_side_by_side(model, make_batch, optimizer=torch.optim.AdamW, steps=STEPS,
                       compile_step=False, **opt_kw):
    """Trains `model` compiled with lazytensor and a copy in eager; returns the worst relative
    loss difference, lazytensor's counters over the run and Dynamo's graph count."""
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="lazytensor")
    opt, ref_opt = optimizer(model.parameters(), **opt_kw), optimizer(ref.parameters(), **opt_kw)
    step = torch.compile(opt.step, backend="lazytensor") if compile_step else opt.step
    torch._dynamo.utils.counters.clear()
    lt.metrics.reset()
    worst = 0.0
    for _ in range(steps):
        batch = make_batch()
        call = (lambda m: m(**batch)) if isinstance(batch, dict) else (lambda m: m(*batch))
        loss = _loss_of(call(compiled))
        loss.backward()
        step()
        opt.zero_grad()
        ref_loss = _loss_of(call(ref))
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        worst = max(worst, abs(loss.item() - ref_loss.item()) / max(abs(ref_loss.item()), 1e-12))
    # SGD's parameters entry by entry; AdamW's all together: it moves an entry whose gradient
    # is float noise by a full step either way (BERT's key biases get exactly zero gradient:
    # softmax ignores a per-row shift), so such entries may differ by lr where losses agree.
    if optimizer is torch.optim.SGD:
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    else:
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        ref_flat = torch.cat([q.detach().flatten() for q in ref.parameters()])
        rel = ((flat - ref_flat).norm() / ref_flat.norm()).item()
        assert rel < 1e-3, f"parameters differ from eager's by {rel:.2e} (relative norm)"
    for b, c in zip(model.buffers(), ref.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-4, atol=1e-5)
    counters = lt.metrics.counters()
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    # One lazytensor compile per AOTAutograd graph, however many steps ran: a forward and a
    # backward for each graph Dynamo captured of the model (a graph break makes two), and one
    # inference graph for a compiled optimizer step.
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    expected = 2 * graphs - (1 if compile_step else 0)
    assert counters["graph_compiles"] == expected, (counters["graph_compiles"], graphs)
    print(f"\n{type(model).__name__}: worst loss rel diff {worst:.2e}, lazytensor compiles "
          f"{counters['graph_compiles']}, fallbacks {counters['fallbacks']}, graph breaks {breaks}")
    return worst, counters, breaks


def test_mlp_with_compiled_optimizer_step():
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 5))
    worst, c, breaks = train_side_by_side(
        model, lambda: (torch.randn(16, 20),), compile_step=True, lr=1e-2)
    assert worst < 1e-4
    # forward, backward, and the optimizer's step (AdamW's foreach ops): one compile each.
    assert c["graph_compiles"] == 3
    assert c["fallbacks"] == 0


def test_cnn_with_batchnorm():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, stride=2, padding=1),
                          nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 10))
    worst, c, _ = train_side_by_side(model, lambda: (torch.randn(8, 3, 16, 16),),
                                     optimizer=torch.optim.SGD, lr=0.05, momentum=0.9)
    assert worst < 1e-4
    assert c["graph_compiles"] == 2 and c["fallbacks"] == 0


def test_cnn_with_dropout_trains_and_draws_new_masks():
    # Dropout's masks come from lazytensor's generator, not PyTorch's, so losses cannot match
    # eager's step for step; what must hold: it trains, compiles once per graph, and each call
    # draws a new mask (the generator advances per call) that backward then uses.
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Dropout(0.3), nn.Flatten(), nn.Linear(8 * 8 * 8, 2))
    compiled = torch.compile(model, backend="lazytensor")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 1, 8, 8)
    y = (x.mean((1, 2, 3)) > 0).long()
    lt.metrics.reset()
    losses = []
    for _ in range(STEPS):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert sum(losses[-5:]) < sum(losses[:5])
    assert lt.metrics.counters()["graph_compiles"] == 2
    drop = torch.compile(nn.Dropout(0.3), backend="lazytensor")
    a = torch.randn(200, 50) + 3
    r1, r2 = drop(a), drop(a)
    assert not torch.equal(r1 == 0, r2 == 0)
    for r in (r1, r2):
        kept = r != 0
        assert abs(kept.float().mean().item() - 0.7) < 0.03
        torch.testing.assert_close(r[kept], a[kept] / 0.7)
    leaf = a.clone().requires_grad_()
    out = drop(leaf)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(leaf.grad, (out != 0).float() / 0.7)


def test_transformer_encoder():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    worst, c, _ = train_side_by_side(model, lambda: (torch.randn(4, 10, 32),), lr=1e-3)
    assert worst < 1e-4
    assert c["graph_compiles"] == 2 and c["fallbacks"] == 0


def test_gpt_with_scaled_dot_product_attention():
    model = GPT()
    worst, c, _ = train_side_by_side(
        model, lambda: (torch.randint(0, 64, (4, 16)), torch.randint(0, 64, (4, 16))), lr=1e-3)
    assert worst < 1e-4
    assert c["graph_compiles"] == 2 and c["fallbacks"] == 0


def _hf_language_model_trains_like_eager(model):
    worst, c, _ = train_side_by_side(
        model, lambda: dict(input_ids=torch.randint(0, 128, (4, 16)),
                            labels=torch.randint(0, 128, (4, 16))), lr=1e-3)
    assert worst < 1e-4
    assert c["fallbacks"] == 0


def test_hf_gpt2_from_config():
    from transformers import GPT2Config, GPT2LMHeadModel
    _hf_language_model_trains_like_eager(GPT2LMHeadModel(GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)))


def test_hf_bert_from_config():
    from transformers import BertConfig, BertForMaskedLM
    _hf_language_model_trains_like_eager(BertForMaskedLM(BertConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
        vocab_size=128, max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)))


def test_timm_resnet18_from_config():
    timm = import_timm()
    model = timm.create_model("resnet18", num_classes=10)
    worst, c, _ = train_side_by_side(model, lambda: (torch.randn(8, 3, 32, 32),),
                                     optimizer=torch.optim.SGD, lr=0.01, momentum=0.9)
    assert worst < 1e-4
    assert c["graph_compiles"] == 2 and c["fallbacks"] == 0


# ---- graphs with ops lazytensor does not run ----------------------------------------------------

def _with_unsupported_op(x):
    y = (x * 2).sin()
    z = torch.cumprod(y, dim=1)  # not in the aten table: runs in PyTorch
    return (z + 1).sum(1)


def test_unsupported_op_splits_the_graph_and_is_counted():
    f = torch.compile(_with_unsupported_op, backend="lazytensor")
    x = torch.randn(3, 5, requires_grad=True)
    lt.metrics.reset()
    out = f(x)
    out.sum().backward()
    ref_x = x.detach().clone().requires_grad_()
    ref = _with_unsupported_op(ref_x)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, ref_x.grad)
    assert lt.metrics.counters()["fallbacks"] >= 2  # cumprod forward and its backward's ops
    assert lazytensor.torch.fallback_ops().get("aten.cumprod.default", 0) >= 2


def test_fallback_raise_mode_names_the_op():
    f = torch.compile(_with_unsupported_op, backend="lazytensor", options={"fallback": "raise"})
    with pytest.raises(Exception, match="cumprod"):
        f(torch.randn(3, 5))


def test_unknown_option_is_a_clear_error():
    f = torch.compile(lambda x: x + 1, backend="lazytensor", options={"fallbak": "split"})
    with pytest.raises(Exception, match="unknown options"):
        f(torch.randn(2))


def test_lt_debug_names_each_fallback_op(tmp_path):
    script = tmp_path / "fallback.py"
    script.write_text(
        "import torch, lazytensor.torch\n"
        "f = torch.compile(lambda x: torch.cumprod(x.sin(), 0) + 1, backend='lazytensor')\n"
        "print(f(torch.randn(4)).shape)\n")
    env = dict(os.environ, LT_DEBUG="1")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "aten.cumprod.default runs in PyTorch (1 in" in r.stdout


def test_backend_by_name_without_import(tmp_path):
    # torch finds the backend through the torch_dynamo_backends entry point.
    script = tmp_path / "by_name.py"
    script.write_text(
        "import sys, torch\n"
        "f = torch.compile(lambda x: (x * 3).exp().sum(), backend='lazytensor')\n"
        "x = torch.randn(6)\n"
        "torch.testing.assert_close(f(x), (x * 3).exp().sum())\n"
        "print('lazytensor.torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("True")


# ---- shapes, mutation, replay -------------------------------------------------------------------

def test_new_shapes_and_symints_are_specialized_without_a_crash():
    f = torch.compile(lambda x: (x.relu() * x.shape[0]).sum(0), backend="lazytensor",
                      dynamic=True)
    for n in (3, 5, 3, 7):
        x = torch.randn(n, 4)
        torch.testing.assert_close(f(x), (x.relu() * n).sum(0))


def test_batchnorm_running_stats_and_inplace_updates_are_written_back():
    bn = nn.BatchNorm1d(6)
    ref = copy.deepcopy(bn)
    f = torch.compile(bn, backend="lazytensor")
    for _ in range(3):
        x = torch.randn(10, 6) * 2 + 1
        torch.testing.assert_close(f(x), ref(x))
    torch.testing.assert_close(bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.running_var, ref.running_var)
    assert bn.num_batches_tracked.item() == ref.num_batches_tracked.item() == 3

    def add_in_place(a, b):
        a.add_(b)
        a.mul_(2)
        return a.sum()

    g = torch.compile(add_in_place, backend="lazytensor")
    a, b = torch.randn(5), torch.randn(5)
    expect = (a + b) * 2
    g(a, b)
    torch.testing.assert_close(a, expect)


def test_second_call_replays_without_tracing_and_results_are_not_overwritten():
    f = torch.compile(lambda x, w: torch.tanh(x @ w) * 2, backend="lazytensor")
    x1, x2, w = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8, 3)
    r1 = f(x1, w)
    lt.metrics.reset()
    r2 = f(x2, w)
    assert lt.metrics.counters()["traced_ops"] == 0
    assert lt.metrics.counters()["graph_compiles"] == 0
    torch.testing.assert_close(r1, torch.tanh(x1 @ w) * 2)
    torch.testing.assert_close(r2, torch.tanh(x2 @ w) * 2)


def test_output_that_is_an_input_is_a_copy():
    f = torch.compile(lambda x: (x.clone(), x * 2), backend="lazytensor")
    x = torch.randn(5)
    c, d = f(x)
    x.add_(1)
    assert not torch.equal(c, x)
    torch.testing.assert_close(d, (x - 1) * 2)


def test_outputs_that_share_our_memory_are_separate_tensors_in_torch():
    """Two computations of one value are one node after our common-subexpression merging, and a
    reshape or slice of a computed value is a view of its buffer (lowering/output_views.h): torch
    gets separate tensors where the FX graph has them, so an in-place op on one output leaves the
    others alone; split's pieces stay views of one base, as in eager. Called twice: the replay too."""
    f = torch.compile(lambda x: (x.exp(), x.exp().view(2, 3), *torch.split(x.exp(), 2)),
                      backend="lazytensor")
    x = torch.randn(6)
    for _ in range(2):
        a, b, *pieces = f(x)
        a.add_(100)
        torch.testing.assert_close(b, x.exp().view(2, 3))
        for k, p in enumerate(pieces):
            torch.testing.assert_close(p, x.exp()[2 * k:2 * k + 2])
        pieces[0].mul_(0)
        torch.testing.assert_close(b, x.exp().view(2, 3))
        torch.testing.assert_close(pieces[1], x.exp()[2:4])


def _exchanges_per_3_steps(step):
    """(imported, reused): the bridge's tensor exchanges (lazytensor.torch.interop.counts) over 3
    calls of `step` after 2 warm-up calls."""
    from lazytensor.torch import interop
    for _ in range(2):
        step()
    before = dict(interop.counts)
    for _ in range(3):
        step()
    return (interop.counts["imported"] - before["imported"],
            interop.counts["reused"] - before["reused"])


def test_a_training_step_exchanges_only_its_batch_through_dlpack():
    """Parameters enter as cached views, the weights a forward saves come back as the very input
    tensors (no copy), and the activations the backward takes back are the forward's own outputs:
    after warm-up a step imports only what torch made afresh: the loss's gradient (the batch, held
    by the script across steps, crossed once)."""
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 3))
    f = torch.compile(model, backend="lazytensor")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))

    def step():
        F.cross_entropy(f(x), y).backward()
        opt.step()
        opt.zero_grad()

    imported, reused = _exchanges_per_3_steps(step)
    assert imported == 3 * 1, (imported, reused)  # the backward's incoming gradient
    # 6 parameters and x into the forward; into the backward, what the min-cut partitioner saves
    # (x, the weights and the activations it does not recompute: 6 here)
    assert reused >= 3 * (7 + 6), (imported, reused)


def test_autocast_gpt_step_takes_back_its_saved_tensors_without_dlpack():
    """Under bf16 autocast the forward saves bf16 weights and activations that autograd hands back
    as new tensor objects (detached aliases, reshapes) of the forward's own outputs: after warm-up
    they come back from the address table, and a step imports only the loss's gradient (25
    imports a step for this 2-layer GPT when the table forgot an output with its first tensor
    object)."""
    torch.manual_seed(0)
    model = GPT(vocab=96, dim=32, heads=4, block=16, layers=2)
    f = torch.compile(model, backend="lazytensor")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx, tgt = torch.randint(0, 96, (2, 16)), torch.randint(0, 96, (2, 16))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = f(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad()

    imported, reused = _exchanges_per_3_steps(step)
    assert imported == 3 * 1, (imported, reused)
    assert reused >= 3 * 40, (imported, reused)


@pytest.fixture
def graph_ops(monkeypatch):
    """The ops of every aten graph the backend compiles from here on (names, in order)."""
    from lazytensor.torch import partition
    seen = []
    real = partition.split_graph

    def spy(gm, name, rejected, mode):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return real(gm, name, rejected, mode)

    monkeypatch.setattr(partition, "split_graph", spy)
    return seen


def test_attention_stays_one_op_forward_and_backward(graph_ops):
    seen = graph_ops
    q, k, v = (torch.randn(2, 3, 8, 16, requires_grad=True) for _ in range(3))
    f = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                      backend="lazytensor")
    out = f(q, k, v)
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), g)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref)
    for a, b in zip(grads, torch.autograd.grad(ref, (q, k, v), g)):
        torch.testing.assert_close(a, b)
    assert "lazytensor.sdpa.default" in seen and "lazytensor.sdpa_backward.default" in seen
    assert not any("_softmax" in t or "bmm" in t for t in seen)  # not decomposed


def test_multihead_attention_inside_torch_functions_is_ours_too(graph_ops):
    # nn.MultiheadAttention reaches sdpa inside F.multi_head_attention_forward, which Dynamo keeps
    # whole: the backend catches the call while AOTAutograd traces it.
    seen = graph_ops
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    compiled = torch.compile(layer, backend="lazytensor")
    x = torch.randn(2, 6, 32)
    torch.testing.assert_close(compiled(x), layer(x))
    compiled(x).sum().backward()
    assert "lazytensor.sdpa.default" in seen and "lazytensor.sdpa_backward.default" in seen
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention


def test_permuted_and_strided_inputs():
    # A permuted input is passed as its dense base and permuted inside the graph; a sliced or
    # expanded one is copied dense first. Either way the result is PyTorch's.
    f = torch.compile(lambda a, b: (a * 2 + b).sum(-1), backend="lazytensor")
    base = torch.randn(4, 6, 5)
    cases = [(base.permute(2, 0, 1), torch.randn(5, 4, 6)),
             (base.transpose(0, 1), torch.randn(6, 4, 5)),
             (base[:, 1:5, ::2], torch.randn(4, 4, 3)),
             (torch.randn(4, 1, 5).expand(4, 6, 5), torch.randn(4, 6, 5))]
    for a, b in cases:
        torch.testing.assert_close(f(a, b), (a * 2 + b).sum(-1))
        torch.testing.assert_close(f(a, b), (a * 2 + b).sum(-1))  # the replay too


def test_parameters_changed_in_place_or_replaced_are_seen():
    # The bridge keeps the tensor over each parameter's memory between calls; an update in place
    # (an optimizer, load_state_dict) and a replaced .data must both be what the next call reads.
    lin = nn.Linear(4, 3)
    f = torch.compile(lin, backend="lazytensor")
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(f(x), lin(x))
        lin.weight.mul_(3)
        torch.testing.assert_close(f(x), lin(x))
        lin.load_state_dict({"weight": torch.randn(3, 4), "bias": torch.randn(3)})
        torch.testing.assert_close(f(x), lin(x))
        lin.weight.data = torch.randn(3, 4)
        torch.testing.assert_close(f(x), lin(x))
    from lazytensor.torch import interop
    before = len(interop._shared)
    del f, lin
    import gc
    gc.collect()
    torch._dynamo.reset()
    gc.collect()
    assert len(interop._shared) < before


def test_inference_in_eval_mode_under_no_grad():
    # The inference graph (AOTAutograd's inference compiler): BatchNorm on running statistics,
    # dropout off, one graph, replayed for each batch.
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Dropout(0.5), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    for m in model.modules():  # running statistics that differ from the defaults
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
    model.eval()
    compiled = torch.compile(model, backend="lazytensor")
    lt.metrics.reset()
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(5, 3, 8, 8)
            torch.testing.assert_close(compiled(x), model(x))
    c = lt.metrics.counters()
    assert c["graph_compiles"] == 1 and c["fallbacks"] == 0
