"""tests/gpu/timeline_summary.py, which reads the GPU timelines that tests/gpu/profile_ddp.py
--timeline writes, on a timeline made up here (no GPU): its steps, busy and idle time, NCCL's time
alone and beside other kernels, and its gaps, against figures worked out by hand."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gpu"))
import timeline_summary  # noqa: E402

# Two steps (the first kernel's name, "fwd", starts each). Step 0: fwd 0-10, an NCCL kernel 8-30
# on another stream, bwd 12-20 (a 2 us gap after fwd), upd 34-40 (a 4 us gap after NCCL's end).
TIMELINE = """start_us end_us dur_us stream name
       0.0       10.0     10.0 7 fwd
       8.0       30.0     22.0 9 ncclDevKernel_AllReduce_Sum_f32_RING_LL(args)
      12.0       20.0      8.0 7 bwd  [gap 2 us on stream 7]
      34.0       40.0      6.0 7 upd  [gap 14 us on stream 7]
     100.0      105.0      5.0 7 fwd  [gap 60 us on stream 7]
     106.0      110.0      4.0 7 upd
"""


@pytest.fixture
def timeline(tmp_path):
    path = tmp_path / "ddp_timeline_ddp.txt"
    path.write_text(TIMELINE)
    return str(path)


def test_steps_split_where_the_first_kernel_comes_back(timeline):
    steps = timeline_summary.steps_of(timeline_summary.read(timeline))
    assert [[r[3] for r in s] for s in steps] == [
        ["fwd", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(args)", "bwd", "upd"], ["fwd", "upd"]]


def test_period_is_start_to_start_so_idle_between_steps_shows(timeline):
    # Step 0 spans 40 us but step 1 starts at 100: 60 us of the period is idle between steps.
    steps = timeline_summary.steps_of(timeline_summary.read(timeline))
    assert timeline_summary.periods(steps) == [100.0]
    assert timeline_summary.periods(steps[:1]) == []
    lines = timeline_summary.report(timeline_summary.read(timeline), gaps=0)
    assert lines[0] == "start to start, ms: 0.100"
    assert [line for line in lines if line.startswith("step ")] == ["step 0:", "step 1:"]


def test_busy_idle_and_nccl_alone_and_beside(timeline):
    step = timeline_summary.steps_of(timeline_summary.read(timeline))[0]
    lines = timeline_summary.summarize(step, gaps=2)
    # Busy: 0-30 and 34-40 = 36 us of a 40 us span.
    assert lines[0] == "span 0.040 ms, GPU busy 0.036, idle 0.004; 4 kernels"
    # NCCL 8-30 (22 us): beside fwd 8-10 and bwd 12-20 (10 us), alone 12 us.
    assert lines[1] == ("NCCL: 1 kernels, 0.022 ms, of which 0.010 beside other kernels and "
                        "0.012 alone")
    assert lines[2].startswith("the last NCCL kernel ends 0.010 ms before the step does")
    assert "0-5 us: 1 (0.004 ms)" in lines[3]
    assert "idle     4.0 us at   0.030 ms: after ncclDevKernel" in lines[4]
    assert "before upd (stream 7)" in lines[4]


def test_a_step_without_nccl_and_a_missing_file_say_so(timeline, tmp_path, capsys):
    step = timeline_summary.steps_of(timeline_summary.read(timeline))[1]
    lines = timeline_summary.summarize(step)
    assert lines[0] == "span 0.010 ms, GPU busy 0.009, idle 0.001; 2 kernels"
    assert not any(line.startswith("NCCL") for line in lines)
    empty = tmp_path / "empty.txt"
    empty.write_text("start_us end_us dur_us stream name\n")
    assert timeline_summary.main([str(empty)]) == 1
    assert "no kernels" in capsys.readouterr().out
