"""examples/python/train_cnn.py and train_gpt.py: with `--device` the only difference, lazy and cpu
give the same losses (1e-4 relative at step 20), lazy compiles one graph for all training steps,
the loss falls, and the scripts' command lines run to a loss-curve PNG."""
import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def load(name):
    sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"lt_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name, kwargs", [
    ("train_cnn", {"steps": 20}),
    ("train_gpt", {"steps": 20, "sample_chars": 0, "batch_size": 8, "block": 32}),
])
def test_example_lazy_matches_cpu_at_step_20(name, kwargs):
    mod = load(name)
    lazy = mod.train("lazy", quiet=True, **kwargs)
    cpu = mod.train("cpu", quiet=True, **kwargs)
    la, lc = np.array(lazy["losses"]), np.array(cpu["losses"])
    np.testing.assert_allclose(la, lc, rtol=1e-4)
    assert lazy["graph_compiles"] == 1  # every training step is the same graph
    assert la[-5:].mean() < la[:5].mean() * 0.9  # learning


def test_cnn_example_reaches_its_accuracy(tmp_path):
    mod = load("train_cnn")
    assert mod.main(["--device", "lazy", "--plot", str(tmp_path / "loss.png")]) == 0
    png = (tmp_path / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_gpt_example_command_line_samples_text(tmp_path):
    out = subprocess.run([sys.executable, str(EXAMPLES / "train_gpt.py"), "--device", "lazy", "--steps", "60",
                          "--batch-size", "8", "--block", "32", "--sample-chars", "40", "--max-loss", "3.2",
                          "--plot", str(tmp_path / "gpt.png")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "--- sample ---" in out.stdout and "lazytensor metrics" in out.stdout
    assert (tmp_path / "gpt.png").read_bytes()[:4] == b"\x89PNG"
