"""torch.compile backends side by side: PyTorch eager, Inductor (torch.compile's default) and
backend="lazytensor", on the same models, weights and batches, in one process.

  PYTHONPATH=build/python .venv/bin/python bench/torch_compile.py [--steps 20] [--json out.json]
                                                  [--only mlp,gpt,cnn] [--device cpu|cuda]

Each contender is timed the same way: a training step (forward, loss, backward, optimizer step,
zero_grad; the optimizer eager for every contender) run in rounds of --steps back to back, one
read of the loss (a synchronize on CUDA) at the end; the median round's wall time divided by the
steps, so host overhead counts for everyone; each contender runs in a process of its own (in one
process the one timed second read 10-30% slower). "first call" is the wall time of the first step
after torch._dynamo.reset(), compile included (lazytensor's disk cache is off, LT_CACHE_DIR=off,
so it compiles cold as Inductor does; Inductor's caches point at a fresh directory per process). On CUDA the
GPT-2 124M rows (gpt2, gpt2_bf16) are ANCHORS.md's whole-model rows.
"""
import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

# The environment each contender's process starts with: as this script found it. (Importing
# lazytensor sets OMP_WAIT_POLICY=PASSIVE for its own thread pool's sake; a child inheriting that
# would run PyTorch's OpenMP kernels passive too, unlike a script that never imported lazytensor.)
_ENV_AT_START = dict(os.environ)
os.environ.setdefault("LT_CACHE_DIR", "off")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-"))
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import lazytensor.torch  # noqa: E402,F401

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from torch_env import allow_torchvision_import, import_timm  # noqa: E402
from timing import median_ms_per_step  # noqa: E402  (bench/, the script's own folder)
from torch_models import GPT  # noqa: E402

DEVICE = "cpu"


def mlp():
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
    return model, (x, y), lambda m, x, y: F.cross_entropy(m(x), y), torch.optim.SGD, dict(lr=0.01)


def _gpt(vocab, dim, heads, block, layers, batch):
    model = GPT(vocab=vocab, dim=dim, heads=heads, block=block, layers=layers)
    idx, tgt = torch.randint(0, vocab, (batch, block)), torch.randint(0, vocab, (batch, block))
    return model, (idx, tgt), lambda m, idx, tgt: m(idx, tgt), torch.optim.AdamW, dict(lr=1e-3)


def gpt():
    return _gpt(256, 128, 4, 64, 4, 8)


def gpt2():
    return _gpt(50304, 768, 12, 1024, 12, 8)


def gpt2_bf16():
    model, batch, loss, opt, kw = gpt2()

    def autocast_loss(m, idx, tgt):
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            return loss(m, idx, tgt)
    return model, batch, autocast_loss, opt, kw


def cnn():
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    return (model, (x, y), lambda m, x, y: F.cross_entropy(m(x), y), torch.optim.SGD,
            dict(lr=0.01, momentum=0.9))


def transformer():
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)
    model = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
    x = torch.randn(16, 64, 256)
    return model, (x,), lambda m, x: m(x).square().mean(), torch.optim.AdamW, dict(lr=1e-3)


def _hf(model, vocab, batch, block):
    ids, labels = torch.randint(0, vocab, (batch, block)), torch.randint(0, vocab, (batch, block))
    return (model, (ids, labels), lambda m, ids, labels: m(input_ids=ids, labels=labels).loss,
            torch.optim.AdamW, dict(lr=1e-3))


def hf_gpt2():
    allow_torchvision_import()
    from transformers import GPT2Config, GPT2LMHeadModel
    return _hf(GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=8192,
                                          n_positions=128, bos_token_id=0, eos_token_id=0)),
               8192, 8, 128)


def hf_bert():
    allow_torchvision_import()
    from transformers import BertConfig, BertForMaskedLM
    return _hf(BertForMaskedLM(BertConfig(num_hidden_layers=4, hidden_size=256,
                                          num_attention_heads=4, intermediate_size=1024,
                                          vocab_size=8192, max_position_embeddings=128)),
               8192, 8, 128)


def resnet18():
    model = import_timm().create_model("resnet18", num_classes=10)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    return (model, (x, y), lambda m, x, y: F.cross_entropy(m(x), y), torch.optim.SGD,
            dict(lr=0.01, momentum=0.9))


def resnet18_cifar():
    """Issue 28's ResNet-18 row: timm's resnet18 with the CIFAR stem (3x3 stride-1 first conv, no
    max-pool), 32x32 input, batch 128, BatchNorm in training mode, SGD momentum."""
    model = import_timm().create_model("resnet18", num_classes=10)
    model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    model.maxpool = torch.nn.Identity()
    x, y = torch.randn(128, 3, 32, 32), torch.randint(0, 10, (128,))
    return (model, (x, y), lambda m, x, y: F.cross_entropy(m(x), y), torch.optim.SGD,
            dict(lr=0.01, momentum=0.9))


WORKLOADS = {"mlp": ("MLP 784-1024-1024-10 train step, batch 128, SGD", mlp),
             "gpt": ("GPT (4 x d128, 4 heads, T 64, B 8, sdpa) train step, AdamW", gpt),
             "cnn": ("CNN (2 x conv-BN-ReLU-pool) train step, batch 64, SGD momentum", cnn),
             "gpt2": ("GPT-2 124M (12 x d768, T 1024, B 8) train step, AdamW, fp32", gpt2),
             "gpt2_bf16": ("GPT-2 124M train step, AdamW, bf16 autocast", gpt2_bf16),
             "transformer": ("nn.TransformerEncoder (4 x d256, T 64, B 16, dropout), AdamW",
                             transformer),
             "hf_gpt2": ("HF GPT2LMHeadModel (4 x d256, vocab 8192, T 128, B 8), AdamW", hf_gpt2),
             "hf_bert": ("HF BertForMaskedLM (4 x d256, vocab 8192, T 128, B 8), AdamW", hf_bert),
             "resnet18": ("timm resnet18 (32x32, B 16), SGD momentum", resnet18),
             "resnet18_cifar": ("timm resnet18, CIFAR stem (32x32, B 128), SGD momentum",
                                resnet18_cifar)}
DEFAULT = {"cpu": "mlp,gpt,cnn,transformer,hf_gpt2,hf_bert,resnet18",
           "cuda": "mlp,cnn,resnet18_cifar,gpt2,gpt2_bf16"}


def make_step(workload, backend):
    """The workload's training step (forward, backward, optimizer step) on DEVICE, its model
    compiled with `backend` (not for "eager"); returns (step, model, optimizer)."""
    torch.manual_seed(0)
    model, batch, loss_fn, opt_cls, opt_kw = workload()
    model = model.to(DEVICE)
    batch = [t.to(DEVICE) for t in batch]
    torch._dynamo.reset()
    m = model if backend == "eager" else torch.compile(model, backend=backend)
    opt = opt_cls(model.parameters(), **opt_kw)

    def step():
        loss = loss_fn(m, *batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return step, model, opt


def run(workload, backend, steps, rounds):
    step, model, opt = make_step(workload, backend)
    t0 = time.perf_counter()
    first_loss = step().item()
    first = time.perf_counter() - t0
    for _ in range(3):
        step()
    step().item()
    step_ms = median_ms_per_step(step, steps, rounds)
    del step, model, opt
    return {"step_ms": step_ms, "first_call_s": first, "first_loss": first_loss}


def run_apart(workload, backend, args):
    """run() in a fresh process: in one process the contender timed second read 10-30% slower
    than the same contender timed first (the GPT row, either order), so each gets a process of
    its own, started the same way."""
    cmd = [sys.executable, os.path.abspath(__file__), "--device", args.device, "--steps",
           str(args.steps), "--rounds", str(args.rounds), "--one", workload, backend]
    # A fresh Inductor cache directory per process: one shared by the run let the rows after the
    # first reuse what earlier Inductor processes built there (its C++ prefix and headers), so
    # their "first call" was no longer cold (GPT's read 11 s after the MLP row, 15 s alone).
    cache = tempfile.mkdtemp(prefix="inductor-bench-")
    env = dict(_ENV_AT_START, LT_CACHE_DIR=os.environ["LT_CACHE_DIR"],
               TORCHINDUCTOR_CACHE_DIR=cache,
               TORCHINDUCTOR_FX_GRAPH_CACHE=os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"])
    if backend != "lazytensor":  # torch's own contenders run without lazytensor's `lazy` device
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # autoloaded into them (lazy_device.autoload)
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{backend} on {workload} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", help="comma-separated workloads (default: " +
                    "; ".join(f"{d}: {w}" for d, w in DEFAULT.items()) + ")")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--json")
    ap.add_argument("--one", nargs=2, metavar=("WORKLOAD", "BACKEND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(os.cpu_count())
    if args.one:  # a child: one contender on one workload, its result as JSON on the last line
        print(json.dumps(run(WORKLOADS[args.one[0]][1], args.one[1], args.steps, args.rounds)))
        return
    where = torch.cuda.get_device_name() if DEVICE == "cuda" else \
        f"{os.cpu_count()} threads, {platform.processor() or platform.machine()}"
    print(f"torch {torch.__version__}, {DEVICE}: {where}")
    results = {}
    header = (f"{'workload':<62} {'eager ms':>9} {'inductor ms':>11} {'lazytensor ms':>13} "
              f"{'lt/ind':>7} {'inductor 1st s':>14} {'lt 1st s':>9} {'ind/lt 1st':>10}")
    print(header)
    for name in (args.only or DEFAULT[DEVICE]).split(","):
        title, workload = WORKLOADS[name]
        r = {b: run_apart(name, b, args) for b in ("eager", "inductor", "lazytensor")}
        results[name] = r
        e, i, lz = (r[b]["step_ms"] for b in ("eager", "inductor", "lazytensor"))
        fi, fl = r["inductor"]["first_call_s"], r["lazytensor"]["first_call_s"]
        print(f"{title:<62} {e:9.2f} {i:11.2f} {lz:13.2f} {lz / i:7.2f} {fi:14.2f} {fl:9.2f} "
              f"{fi / fl:10.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": DEVICE, "where": where,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
