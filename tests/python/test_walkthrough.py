"""examples/debugging/walkthrough.py end to end (dump, replay in process and with the CLI, bisect
of a hand-edited node), and Python source locations on traced nodes."""
import json
import os
import subprocess
import sys

import numpy as np

import lazytensor as lt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli():
    pkg = os.path.dirname(os.path.abspath(lt.__file__))  # <build>/python/lazytensor
    return os.path.join(os.path.dirname(os.path.dirname(pkg)), "bin", "lazytensor")


def test_walkthrough_runs_and_bisect_names_the_edited_node_with_its_source(tmp_path):
    env = dict(os.environ, LT_CACHE_DIR="off")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "debugging", "walkthrough.py"),
                        "--cli", _cli(), "--dir", str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "walkthrough: OK" in r.stdout
    line = next(l for l in r.stdout.splitlines() if "diverges" in l)
    assert " = sin " in line and "walkthrough.py:" in line


def test_nodes_carry_the_callers_file_and_line(tmp_path, rng):
    x = lt.tensor(rng.standard_normal((4, 3)).astype(np.float32), device="lazy")
    y = (x * 2).exp()  # this line
    here = f"{os.path.abspath(__file__)}:{sys._getframe().f_lineno - 1}"
    path = tmp_path / "t.json"
    lt.debug.dump(str(path), y, data=False)
    sources = {n["op"]: n["source"] for n in json.loads(path.read_text())["nodes"]}
    assert sources["exp"] == here, sources
