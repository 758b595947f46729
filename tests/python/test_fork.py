"""A process forked after lazytensor ran parallel kernels (a DataLoader or multiprocessing worker
started with fork) computes in the child: the CPU thread pool starts anew there instead of
waiting for the parent's worker threads, which the child does not have."""
import os
import subprocess
import sys
import textwrap


def test_forked_child_runs_parallel_kernels():
    script = textwrap.dedent("""
        import os, sys
        import numpy as np
        import lazytensor as lt
        x = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
        for device in ("cpu", "lazy"):
            t = lt.tensor(x, device=device)
            expect = float(np.sin(x).sum(dtype=np.float64))
            assert abs((t.sin().sum()).item() - expect) < 1e-2 * abs(expect) + 1e-2
        pid = os.fork()
        if pid == 0:
            try:
                for device in ("cpu", "lazy"):
                    t = lt.tensor(x * 2, device=device)
                    got = (t.sin().sum()).item()
                    want = float(np.sin(x * 2).sum(dtype=np.float64))
                    assert abs(got - want) < 1e-2 * abs(want) + 1e-2, (got, want)
                os._exit(0)
            except BaseException as e:
                print("child:", repr(e), flush=True)
                os._exit(3)
        _, status = os.waitpid(pid, 0)
        print("child status", os.waitstatus_to_exitcode(status))
        sys.exit(os.waitstatus_to_exitcode(status))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, LT_CACHE_DIR="off", LT_NUM_THREADS="2"))
    assert r.returncode == 0, r.stdout + r.stderr
