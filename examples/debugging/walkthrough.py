"""Debugging walkthrough: dump a lazy training step, replay it on another backend, and bisect a
graph whose one node was changed by hand. Run after `make`:

    PYTHONPATH=build/python .venv/bin/python examples/debugging/walkthrough.py [--cli build/bin/lazytensor]

1. One MLP training step (forward, cross_entropy, backward, SGD update) is traced on "lazy" and
   dumped with its input and output data (lt.debug.dump).
2. The dump is replayed on the reference interpreter, in process (lt.debug.replay) and with the
   command-line tool (`lazytensor replay FILE --backend reference --check`): both must match.
3. A copy of the dump gets one node changed (the first `exp` becomes `sin`), as if a backend had a
   wrong kernel; `lazytensor bisect` runs the reference interpreter and the chosen backend node by
   node and names the first node whose value diverges.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import lazytensor as lt


def training_step_tensors():
    lt.manual_seed(0)
    rng = np.random.default_rng(0)
    model = lt.nn.Sequential(lt.nn.Linear(8, 16), lt.nn.Tanh(), lt.nn.Linear(16, 3)).to("lazy")
    x = lt.tensor(rng.standard_normal((32, 8)).astype(np.float32), device="lazy")
    y = lt.tensor(rng.integers(0, 3, 32), device="lazy")
    lt.mark_step()
    loss = lt.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    with lt.no_grad():
        updated = [p - 0.1 * p.grad for p in model.parameters()]
    return [loss] + updated


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"$ {' '.join(cmd)}\n{r.stdout.strip()}\n{r.stderr.strip()}".rstrip(), f"\n(exit {r.returncode})")
    return r.returncode


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(here, "..", "..", "build", "bin", "lazytensor"))
    ap.add_argument("--dir", default=None, help="where to write the dumps (default: a temp dir)")
    args = ap.parse_args()
    out = args.dir or tempfile.mkdtemp(prefix="lt_walkthrough_")
    os.makedirs(out, exist_ok=True)

    print("1. dump one training step")
    trace = os.path.join(out, "step.json")
    key = lt.debug.dump(trace, *training_step_tensors(), data=True)
    nodes = json.load(open(trace))["nodes"]
    print(f"   {trace}: graph {key}, {len(nodes)} nodes")

    print("2. replay it on the reference interpreter")
    report = lt.debug.replay(trace, backend="reference", check=True)
    print(f"   in process: ok={report['ok']} max_rel_error={report['max_rel_error']:.2e}")
    rc_replay = run([args.cli, "replay", trace, "--backend", "reference", "--check"])

    print("3. change one node by hand and bisect")
    doc = json.load(open(trace))
    target = next(n for n in doc["nodes"] if n["op"] == "exp")
    target["op"] = "sin"
    bad = os.path.join(out, "step_edited.json")
    json.dump(doc, open(bad, "w"))
    print(f"   node {target['id']}: exp -> sin in {bad}")
    rc_bisect = run([args.cli, "bisect", bad, "--backend", "cpu"])

    ok = report["ok"] and rc_replay == 0 and rc_bisect != 0
    print("walkthrough:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
