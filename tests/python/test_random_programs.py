"""The differential tester (issue 26): random programs of views, in-place writes through them,
elementwise ops, reductions, dtypes and gradients (tests/python/random_programs.py), each run in
torch 2.13 (CPU, eager: the oracle) and in lazytensor on `cpu` and `lazy`; values, dtypes,
gradients and error types must agree. LT_RANDOM_PROGRAMS sets how many seeds run (make test keeps
the default); a failure names its seed and prints the recipe, which reproduces it alone."""
import os

import pytest
import torch

from parity import check
from random_programs import recipe, run

COUNT = int(os.environ.get("LT_RANDOM_PROGRAMS", "120"))


def _mode(program):
    """How torch can run the program: "grad" (values and gradients); "values" when torch refuses
    the backward because a write overwrote a value saved for it (lazytensor, functional underneath,
    would not notice: no oracle there); "no_grad" when torch refuses even the forward under
    autograd (a write to an output of a multi-view function such as chunk): run without grad.
    With a "+clone" suffix: torch refuses an in-place operand that partly overlaps the written
    memory, so both run with such operands cloned (random_programs.run)."""
    clone = False
    try:
        with torch.no_grad():
            run(program, torch, "cpu", backward=False)
    except RuntimeError as e:
        if "refer to a single memory location" not in str(e):
            raise
        clone = True
    suffix = "+clone" if clone else ""
    if program["dtype"] == "int64":
        return "values" + suffix
    try:
        run(program, torch, "cpu", backward=True, clone_operands=clone)
    except RuntimeError as e:
        if "modified by an inplace operation" in str(e):
            return "values" + suffix
        if "function that returns multiple views" in str(e):
            return "no_grad" + suffix
    return "grad" + suffix


def _program(program, mode):
    clone = mode.endswith("+clone")
    mode = mode.removesuffix("+clone")

    def go(lib, dev):
        if mode == "no_grad":
            with lib.no_grad():
                return run(program, lib, dev, backward=False, clone_operands=clone)
        return run(program, lib, dev, backward=mode == "grad", clone_operands=clone)
    return go


@pytest.mark.parametrize("seed", range(COUNT))
def test_random_program(device, seed):
    program = recipe(seed)
    mode = _mode(program)
    try:
        check(_program(program, mode), device, rtol=1e-4, atol=1e-5)
    except AssertionError as e:
        raise AssertionError(f"seed {seed} ({mode}): {program}\n{e}") from None


def test_most_programs_check_gradients():
    """The gradient comparison is not silently vacuous: most float programs are differentiable."""
    programs = [recipe(s) for s in range(COUNT)]
    floats = [p for p in programs if p["dtype"] != "int64"]
    with_grads = sum(_mode(p).startswith("grad") for p in floats)
    assert with_grads >= 0.6 * len(floats), f"{with_grads} of {len(floats)}"
