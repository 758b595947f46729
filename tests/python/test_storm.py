"""Issue 7: LT_DEBUG=1 on a script whose batch size changes every step prints one recompilation-
storm warning naming the call site (the user's file:line) and the input whose shape changed."""
import os
import subprocess
import sys

SCRIPT = """
import numpy as np
import lazytensor as lt
w = lt.tensor(np.ones((8, 4), np.float32), device="lazy")
for batch in range(1, 15):
    x = lt.tensor(np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32), device="lazy")
    y = (x @ w).relu().sum()
    lt.mark_step()   # the sync line
"""


def test_changing_batch_size_warns_once_naming_the_input_and_the_line(tmp_path):
    # With automatic dynamic shapes off (LT_DYNAMIC=0), as when a program does not generalize.
    script = tmp_path / "storm.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, LT_DEBUG="1", LT_CACHE_DIR="off", LT_DYNAMIC="0")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    warnings = [l for l in r.stderr.splitlines() if "recompilation storm" in l]
    assert len(warnings) == 1, r.stderr[-3000:]
    w = warnings[0]
    assert f"{script}:8" in w, w  # the mark_step line of the user's script (SCRIPT starts with a newline)
    assert "input 0 changed from float32[8, 8] to float32[9, 8]" in w, w
    # The dimension that keeps changing, with the sizes it took (batch 1 stays apart: it compiles
    # a graph of its own too, so all nine sizes 1..9 were seen when the ninth graph warned).
    assert "dim 0 keeps changing (9 sizes: 1, 2, 3, ..., 9)" in w, w
    assert "dim 1 keeps" not in w, w


def test_changing_batch_size_compiles_once_symbolically_instead(tmp_path):
    # Automatic dynamic shapes (issue 30): batch 1 compiles statically; batch 2 differs from it in
    # the batch dim alone, so it compiles with that dim symbolic, which serves every later batch.
    script = tmp_path / "storm.py"
    script.write_text(SCRIPT + "print(lt.metrics.counters()['graph_compiles'], "
                      "lt.metrics.counters()['symbolic_compiles'])\n")
    env = dict(os.environ, LT_DEBUG="1", LT_CACHE_DIR="off")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "recompilation storm" not in r.stderr
    assert "dynamic shapes: input 0 dim 0 changed from" in r.stderr
    assert r.stdout.split()[-2:] == ["2", "1"], r.stdout


def test_fixed_shapes_never_warn(tmp_path):
    script = tmp_path / "steady.py"
    script.write_text(SCRIPT.replace("(batch, 8)", "(4, 8)"))
    env = dict(os.environ, LT_DEBUG="1", LT_CACHE_DIR="off")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "recompilation storm" not in r.stderr


def test_a_value_baked_into_the_trace_is_named_as_the_cause(tmp_path):
    """Issue 26 item 8: same input shapes, a graph that changes every step: the warning says a
    baked value changes (here a slice bound), with the graphs' sizes, in terms a user can act on."""
    script = tmp_path / "baked.py"
    script.write_text(SCRIPT.replace("(batch, 8)", "(16, 8)").replace(
        "y = (x @ w).relu().sum()", "y = (x[:batch] @ w).relu().sum()"))
    env = dict(os.environ, LT_DEBUG="1", LT_CACHE_DIR="off")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    warnings = [l for l in r.stderr.splitlines() if "recompilation storm" in l]
    assert len(warnings) == 1, r.stderr[-3000:]
    assert "a value baked into the trace changes every step (a slice bound" in warnings[0], warnings[0]
    assert "nodes)" in warnings[0]
