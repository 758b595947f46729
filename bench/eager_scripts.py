"""Eager `cpu` against PyTorch eager on whole training scripts (issue 32 item 2: "the scripts run
their eager steps within 1.5x of PyTorch eager"). The scripts are our own versions of the public
ones, as the tests run them (tests/python/test_script_*.py, test_public_scripts.py): in one
process, a warm-up run per library (lazytensor compiles its kernels there), then 3 timed runs per
library, alternating (time.perf_counter around the whole script: data, training steps,
evaluation). Ratio = lazytensor / torch of the medians.

    PYTHONPATH=build/python .venv/bin/python bench/eager_scripts.py [--json out.json]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

import lazytensor as lt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from test_public_scripts import regression  # noqa: E402
from test_script_char_gpt import gpt, makemore_mlp  # noqa: E402
from test_script_mnist_vae import mnist, vae  # noqa: E402
from test_script_seq_mingpt import mingpt, time_sequence_prediction  # noqa: E402
from test_script_word_language_model import word_language_model  # noqa: E402

SCRIPTS = {
    "regression": regression,
    "char_gpt": gpt,
    "makemore": makemore_mlp,
    "mnist": mnist,
    "vae": vae,
    "time_sequence_prediction": time_sequence_prediction,
    "mingpt": mingpt,
    "word_language_model": word_language_model,
}


def timed(fn, lib):
    t0 = time.perf_counter()
    fn(lib, "cpu")
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", help="comma-separated script names")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else list(SCRIPTS)
    rows = {}
    for name in names:
        fn = SCRIPTS[name]
        for lib in (torch, lt):  # warm-up: lazytensor compiles its kernels here
            timed(fn, lib)
        runs = {torch: [], lt: []}
        for _ in range(3):
            for lib in (torch, lt):
                runs[lib].append(timed(fn, lib))
        rows[name] = {"torch_s": statistics.median(runs[torch]),
                      "lazytensor_s": statistics.median(runs[lt])}
    print(json.dumps(rows))
    print("| script | torch eager s | lazytensor cpu s | ratio |")
    print("| --- | --- | --- | --- |")
    for name, r in rows.items():
        print(f"| {name} | {r['torch_s']:.3f} | {r['lazytensor_s']:.3f} | "
              f"{r['lazytensor_s'] / r['torch_s']:.2f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
