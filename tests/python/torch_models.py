"""Models written as PyTorch users write them, shared by the bridge's tests
(test_torch_compile_models.py), its GPU check (tests/gpu/check_torch_compile_cuda.py) and its
benchmark (bench/torch_compile.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT(nn.Module):
    """A nanoGPT-style decoder written with F.scaled_dot_product_attention."""

    def __init__(self, vocab=64, dim=48, heads=4, block=16, layers=2):
        super().__init__()
        self.heads = heads
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln1=nn.LayerNorm(dim), qkv=nn.Linear(dim, 3 * dim), proj=nn.Linear(dim, dim),
            ln2=nn.LayerNorm(dim), fc=nn.Linear(dim, 4 * dim), out=nn.Linear(4 * dim, dim)))
            for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight  # weight tying, as nanoGPT does

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            q, k, v = b.qkv(b.ln1(x)).split(x.shape[-1], dim=2)
            q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + b.proj(y.transpose(1, 2).contiguous().view(B, T, -1))
            x = x + b.out(F.gelu(b.fc(b.ln2(x))))
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
