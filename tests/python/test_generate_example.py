"""examples/python/generate.py (issue 30, item 4): greedy generation with a growing context and with
a preallocated KV cache written in place. On lazy the KV cache compiles the same two graphs (the
prefill and one decoding step) whatever the number of tokens; every way, on lazy and on eager cpu,
generates the same tokens."""
import importlib.util
import pathlib
import sys

import pytest

import lazytensor as lt

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
PROMPT = "import lazytensor"
TOKENS = 24


@pytest.fixture(scope="module")
def gen():
    sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location("lt_example_generate", EXAMPLES / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def trained(gen):
    """The example's model (a fresh one, seeded) with its weight matrices multiplied by 10, and the
    prompt's ids. This checks the decoding, not the model: after the few training steps a test can
    afford, every greedy token is a space (a broken cache would generate the same) and the top two
    logits are nearly tied; the sharpened model's tokens vary and its top two logits differ by
    >= 0.09 at every step (lazy and cpu differ by ~1e-5), so comparing tokens is telling and stable.
    test_generate_command_line trains."""
    import train_gpt
    stoi = {c: i for i, c in enumerate(sorted(set(train_gpt.load_corpus())))}
    lt.manual_seed(0)
    model = gen.GPT(len(stoi), len(PROMPT) + TOKENS).to("lazy")
    with lt.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(10.0)
    lt.mark_step()
    return model, [stoi[c] for c in PROMPT]


def test_kv_cache_on_lazy_compiles_two_graphs_whatever_the_number_of_tokens(gen, trained):
    model, ids = trained
    model = gen.to_device(model, "lazy")
    for tokens in (TOKENS // 2, TOKENS):
        lt._C._clear_graph_cache()  # compile afresh (the tests run with LT_CACHE_DIR=off)
        c = gen.run_way("kv_cache", model, ids, tokens, "lazy")["counters"]
        # The prefill graph, then one decoding-step graph that every later token reuses.
        assert (c["graph_compiles"], c["graph_cache_hits"]) == (2, tokens - 2)
        assert c["fallbacks"] == 0
        assert lt.metrics.syncs_by_reason().get("mark_step") == tokens  # one sync per token
    c = gen.run_way("kv_cache", model, ids, TOKENS, "lazy")["counters"]
    assert (c["graph_compiles"], c["graph_cache_hits"]) == (0, TOKENS)  # twice the tokens: no compile


def test_kv_cache_tokens_equal_growing_context_tokens_on_lazy_and_cpu(gen, trained):
    model, ids = trained
    lt._C._clear_graph_cache()
    results = gen.generate_all(model, ids, TOKENS)
    assert [(r["way"], r["device"]) for r in results] == [
        ("growing", "lazy"), ("kv_cache", "lazy"), ("growing", "cpu"), ("kv_cache", "cpu")]
    ref = results[0]["tokens"]
    assert len(ref) == TOKENS and len(set(ref)) >= 6  # varied tokens: the comparison tells something
    for r in results[1:]:
        assert r["tokens"] == ref, (r["way"], r["device"])
    growing = results[0]["counters"]
    # The first length compiles statically; the second differs from it only in the length, so it
    # compiles with the length symbolic (automatic dynamic shapes), and every later length reuses it.
    assert (growing["graph_compiles"], growing["graph_cache_hits"]) == (2, TOKENS - 2)
    assert growing["symbolic_compiles"] == 1
    assert results[1]["counters"]["graph_compiles"] == 2


def test_growing_context_of_256_tokens_compiles_at_most_three_graphs(gen):
    """Issue 30's bar: greedy generation of 256 tokens with a growing context (lengths 17..272)
    compiles at most 3 graphs on lazy, and generates the KV cache's tokens."""
    import train_gpt
    stoi = {c: i for i, c in enumerate(sorted(set(train_gpt.load_corpus())))}
    lt.manual_seed(1)
    model = gen.GPT(len(stoi), len(PROMPT) + 256).to("lazy").eval()
    ids = [stoi[c] for c in PROMPT]
    lt._C._clear_graph_cache()
    grow = gen.run_way("growing", model, ids, 256, "lazy")
    c = grow["counters"]
    assert c["graph_compiles"] <= 3 and c["graph_compiles"] + c["graph_cache_hits"] == 256, c
    assert c["symbolic_compiles"] >= 1
    kv = gen.run_way("kv_cache", model, ids, 256, "lazy")
    assert kv["tokens"] == grow["tokens"]


def test_generate_command_line(gen, capsys):
    lt._C._clear_graph_cache()  # compile afresh, and forget what call sites learned before
    assert gen.main(["--tokens", "6", "--steps", "20"]) == 0
    out = capsys.readouterr().out
    assert "lazy, KV cache: 2 graphs" in out and "lazy, growing context: 2 graphs (1 with the length symbolic)" in out
    assert "the KV cache's tokens equal the growing context's, on lazy and on cpu" in out
