"""Calls that crashed the C++ runtime. Each runs in a child process, so that a crash fails one
test instead of killing the whole run; the child's exit status must be 0."""
import pytest

from conftest import run_isolated

CASES = {
    "zero_dim_full_cpu": "print(lt.full((), 2.5))",
    "zero_dim_full_lazy": "print(lt.full((), 2.5, device='lazy').numpy())",
    "scalar_tensor_int": "print(lt._C.scalar_tensor(3, None, lt.device('cpu')))",
    "where_tensor_number": (
        "c = lt.tensor([True, False]); a = lt.tensor([1.0, 2.0])\n"
        "assert lt.where(c, a, -1.5).tolist() == [1.0, -1.5]\n"
        "assert lt.where(c, -1.5, a).tolist() == [-1.5, 2.0]"),
    "where_numbers_lazy": (
        "c = lt.tensor([True, False], device='lazy')\n"
        "assert lt.where(c, 3, 4).tolist() == [3, 4]"),
    "masked_fill": (
        "x = lt.tensor([1.0, 2.0, 3.0])\n"
        "assert x.masked_fill(x > 1.5, 0.5).tolist() == [1.0, 0.5, 0.5]"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_does_not_crash(name):
    r = run_isolated(CASES[name])
    assert r.returncode == 0, (f"child exited with {r.returncode} "
                               f"({'signal ' + str(-r.returncode) if r.returncode < 0 else 'error'})\n"
                               f"{r.stdout}\n{r.stderr[-2000:]}")
