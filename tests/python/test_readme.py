"""The README's first-screen example runs as shown and prints what its comment says."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_readme_example_prints_one_graph_of_one_kernel():
    text = open(os.path.join(ROOT, "README.md")).read()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    expected = re.search(r"#\s*([0-9 ]+)\s*$", code.strip().splitlines()[-1]).group(1).strip()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, LT_CACHE_DIR="off"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expected == "1 1"


def test_readme_torch_compile_example_compiles_forward_and_backward_with_lazytensor():
    text = open(os.path.join(ROOT, "README.md")).read()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[1]
    assert 'backend="lazytensor"' in code
    check = ("\nimport lazytensor as lt\nc = lt.metrics.counters()\n"
             "print(c['graph_compiles'], c['fallbacks'])\n")
    r = subprocess.run([sys.executable, "-c", code + check], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, LT_CACHE_DIR="off"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "2 0"  # forward and backward, nothing in PyTorch


def test_readme_lazy_device_example_trains_on_lazytensor_from_import_torch_alone():
    text = open(os.path.join(ROOT, "README.md")).read()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[2]
    assert 'device = "lazy"' in code and "lazytensor" not in code
    check = ("\nimport lazytensor as lt\nc = lt.metrics.counters()\n"
             "print(type(loss).__name__, c['graph_compiles'], c['fallbacks'])\n")
    r = subprocess.run([sys.executable, "-c", code + check], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, LT_CACHE_DIR="off"))
    assert r.returncode == 0, r.stderr
    # One graph for every step: AdamW's state, created inside the first step(), is device data
    # from the start (lazy_dispatch._like_as_data), so the first step's graph is every step's.
    assert r.stdout.strip().splitlines()[-1] == "LazyTensor 1 0"
