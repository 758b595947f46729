"""Timing percentiles in lt.metrics and the LT_PROFILE Chrome trace file."""
import json
import os
import subprocess
import sys

import numpy as np

import lazytensor as lt


def test_timings_cover_the_phases_of_a_sync(rng):
    lt.metrics.reset()
    x = lt.tensor(rng.standard_normal((16, 8)).astype(np.float32), device="lazy")
    for step in range(3):
        y = (x * (step + 1.5)).tanh().sum(1)
        lt.mark_step()
    y.numpy()
    t = lt.metrics.timings()
    for phase in ("trace", "hash", "run", "transfer"):
        assert t[phase]["count"] >= 1, phase
        assert 0 <= t[phase]["p50_ms"] <= t[phase]["max_ms"]
    assert "timings (ms)" in lt.metrics.report()
    lt.metrics.reset()
    assert lt.metrics.timings() == {}


def test_lt_profile_writes_a_chrome_trace(tmp_path):
    out = tmp_path / "trace.json"
    code = ("import lazytensor as lt\n"
            "x = lt.randn(32, 32, device='lazy')\n"
            "y = (x @ x).relu().sum()\n"
            "print(y.item())\n")
    env = dict(os.environ, LT_PROFILE=str(out), LT_CACHE_DIR="off")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    events = json.loads(out.read_text())["traceEvents"]
    cats = {e["cat"] for e in events}
    assert {"trace", "hash", "lower", "compile", "run", "kernel"} <= cats, cats
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert any(e["name"] == "gemm" or e["name"].startswith("k") for e in kernels), kernels
    for e in events:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0
