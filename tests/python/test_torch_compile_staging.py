"""The torch.compile bridge's staging of moving inputs (graph_program._Staging): an input position
whose torch tensor arrives at a new address each call is copied into one buffer kept for that
position, so the graph's CUDA graph replays see a stable address (checked end to end on the GPU by
tests/gpu/check_torch_compile_cuda.py's replay counts). Exercised here on CPU tensors, with the
device filter widened to "cpu"."""
import torch

from lazytensor.torch.graph_program import _Staging


def test_a_moving_input_is_copied_into_one_buffer_and_a_still_one_is_not():
    s = _Staging(device_types=("cpu",))
    still = torch.randn(3, 5)
    got = []
    for k in range(4):
        moving = torch.randn(4, 6) + k  # a new allocation each call, as a loss gradient is
        assert s.stable(0, still) is still
        out = s.stable(1, moving)
        assert torch.equal(out, moving)
        got.append(out)
    # First call: nothing to compare with; from the second on, the same buffer every call.
    assert got[0] is not got[1] and got[1] is got[2] is got[3]
    assert got[1].data_ptr() == got[3].data_ptr()


def test_large_and_reshaped_inputs_are_passed_as_they_are():
    s = _Staging(device_types=("cpu",))
    big = [torch.randn(_Staging.LIMIT_BYTES // 4 + 1) for _ in range(2)]
    assert s.stable(0, big[0]) is big[0] and s.stable(0, big[1]) is big[1]
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    s.stable(2, a)
    staged = s.stable(2, b)
    assert staged is not b and torch.equal(staged, b)
    c = torch.randn(3, 2)  # another shape at the same position: no longer staged
    assert s.stable(2, c) is c


def test_cuda_only_by_default():
    s = _Staging()
    xs = [torch.randn(2, 2) for _ in range(3)]
    assert all(s.stable(0, x) is x for x in xs)


def test_a_strided_input_is_copied_dense_into_one_buffer_from_the_first_call():
    s = _Staging(device_types=("cpu",))
    outs = []
    for _ in range(3):
        t = torch.randn(5, 8)[:, ::2]  # a fresh strided view each call
        out = s.stable(0, t)
        assert out.is_contiguous() and torch.equal(out, t)
        outs.append(out)
    assert outs[0] is outs[1] is outs[2]
