"""lt.distributed on the CPU: groups of 2 and 3 processes launched by torchrun (PyTorch's
launcher, from the project's environment) over Gloo. The scripts under distributed_scripts/ are
the ranks; each checks its results against numpy or one PyTorch process and prints "ok <rank>".
Also: a rank that dies makes the others raise instead of hang, and collectives without a group
are errors."""
import json
import os
import socket
import subprocess
import sys

import pytest

import lazytensor as lt
import lazytensor.distributed as dist

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_scripts")


def _free_port_pair():
    """A port p with p + 1 free too (under torchrun lazytensor's store takes MASTER_PORT + 1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p >= 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no free pair of ports")


def _torchrun(script, nproc, timeout_s=20, deadline_s=240, **extra_env):
    env = dict(os.environ, LT_DIST_TIMEOUT=str(timeout_s), LT_CACHE_DIR="off",
               OMP_NUM_THREADS="1", **extra_env)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           "--master-addr=127.0.0.1", f"--master-port={_free_port_pair()}",
           os.path.join(SCRIPTS, script)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=deadline_s)
    return p.returncode, p.stdout + p.stderr


def _every_rank_ok(script, nproc, **extra_env):
    rc, out = _torchrun(script, nproc, **extra_env)
    assert rc == 0, out
    for r in range(nproc):
        assert f"ok {r}" in out, out


@pytest.mark.parametrize("nproc", [2, 3])
def test_collectives_on_lazy_reference_and_eager(nproc):
    _every_rank_ok("collectives.py", nproc)


@pytest.mark.parametrize("nproc", [2, 3])
def test_data_parallel_training_matches_one_process(nproc):
    _every_rank_ok("data_parallel.py", nproc)


@pytest.mark.parametrize("nproc", [2, 3])
def test_distributed_data_parallel_matches_one_process(nproc):
    _every_rank_ok("ddp.py", nproc)


@pytest.mark.parametrize("script,mode,placement", [("ddp.py", "per_tensor", "light"),
                                                   ("ddp_compiled.py", "flat", "ready")])
def test_ddp_reduce_modes_match_one_process(script, mode, placement):
    # DDP's other ways of averaging a bucket (runtime/distributed.h: ddp_reduce_mode; bucket is
    # Gloo's default, run by the tests above), over Gloo.
    # mixed (and each mode again) in two ranks: data_parallel_test.cc; every mode's all_reduces and
    # values in one process: test_nn_parallel.py. per_tensor (a collective per gradient) also with
    # its collectives moved beside light work (lowering/collective_placement.h): the moves must
    # leave every value as it was.
    _every_rank_ok(script, 2, LT_DDP_REDUCE=mode, LT_COLLECTIVE_PLACEMENT=placement)


def test_distributed_data_parallel_under_lt_compile_matches_one_process():
    # The whole step compiled (lt.compile): its bucket all_reduces are captured and replayed.
    _every_rank_ok("ddp_compiled.py", 2)


def test_bucket_all_reduces_overlap_the_backward_pass(tmp_path):
    """LT_PROFILE's Chrome trace of a DDP step: kernels start on the compute thread while a
    gradient bucket's all_reduce runs on the collective worker."""
    rc, out = _torchrun("overlap.py", 2, LT_TEST_TRACE_DIR=str(tmp_path))
    assert rc == 0, out
    for r in range(2):
        events = json.loads((tmp_path / f"trace_{r}.json").read_text())["traceEvents"]
        kernels = [e for e in events if e["cat"] == "kernel"]
        reduces = [e for e in kernels if e["name"].endswith("_all_reduce")]
        assert len(reduces) >= 6, [e["name"] for e in kernels][:40]  # a bucket per layer
        overlapped = [k for c in reduces for k in kernels
                      if k["tid"] != c["tid"] and c["ts"] <= k["ts"] < c["ts"] + c["dur"]]
        assert overlapped, f"rank {r}: no kernel ran during an all_reduce"


def test_train_ddp_example_runs_on_two_ranks():
    env = dict(os.environ, LT_CACHE_DIR="off", OMP_NUM_THREADS="1", LT_DIST_TIMEOUT="60")
    example = os.path.join(SCRIPTS, "..", "..", "..", "examples", "python", "train_ddp.py")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
                        "--master-addr=127.0.0.1", f"--master-port={_free_port_pair()}", example,
                        "--steps", "30", "--max-loss", "4.5"],
                       env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "weights equal on every rank: True" in out, out


def test_cpp_train_ddp_example_runs_on_two_ranks():
    """examples/cpp/train_ddp.cpp, a program of its own, under torchrun --no-python."""
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(lt.__file__))), "bin",
                       "train_ddp")
    if not os.path.exists(exe):
        pytest.skip(f"{exe} is not built")
    env = dict(os.environ, LT_CACHE_DIR="off", OMP_NUM_THREADS="1", LT_DIST_TIMEOUT="60")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
                        "--master-addr=127.0.0.1", f"--master-port={_free_port_pair()}",
                        "--no-python", exe, "--steps", "100"],
                       env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "2 ranks on lazy" in out, out
    assert "weights equal on every rank: true" in out, out


def test_a_dead_rank_makes_the_others_raise():
    rc, out = _torchrun("dead_rank.py", 3, timeout_s=5, deadline_s=120)
    for r in range(2):
        assert f"raised {r}:" in out, out
        assert f"alive {r}" in out, out  # the group left, the device still computes
    assert "no error" not in out, out


def test_ranks_that_sync_different_graphs_raise():
    rc, out = _torchrun("mismatch.py", 2, timeout_s=30, deadline_s=120)
    for r in range(2):
        assert f"raised {r}: collectives differ between ranks" in out, out
    assert "no error" not in out, out


def test_collectives_need_a_group():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_backend()
    t = lt.ones(3, device="lazy")
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(t)
    with pytest.raises(ValueError, match="op must be one of"):
        dist._op("mean")


def test_nccl_without_a_gpu_is_a_clear_error_and_gloo_still_works(monkeypatch):
    # This machine has no GPU (and no NCCL library): init_process_group("nccl") says which is
    # missing, leaves no group behind, and a Gloo group of one starts afterwards in the same
    # process. The NCCL group itself is tested on GPUs (tests/gpu/check_ddp_cuda.py).
    port = _free_port_pair()
    for k, v in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(port), "LT_DIST_TIMEOUT": "5"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    with pytest.raises((NotImplementedError, RuntimeError),
                       match=r"init_process_group\(nccl\): rank 0 of 1 .*nccl"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()
    dist.init_process_group()  # no GPU here: None means Gloo
    try:
        assert dist.get_backend() == "gloo"
        t = lt.tensor([1.5, -2.0], device="lazy")
        dist.all_reduce(t, op="sum")
        assert t.tolist() == [1.5, -2.0]
    finally:
        dist.destroy_process_group()
