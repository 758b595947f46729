"""examples/python/demo.py (what `make demo` runs): train_mlp on lazy and cpu, side by side."""
import importlib.util
import pathlib

DEMO = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "demo.py"


def test_demo_runs_and_reports(capsys):
    spec = importlib.util.spec_from_file_location("lt_demo", DEMO)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    demo.STEPS, demo.REQUIRED = 30, 0.6  # a short run: the full demo is `make demo`
    demo.main()
    out = capsys.readouterr().out
    assert "lazytensor metrics" in out and "steps/s after the first" in out
    lines = [l for l in out.splitlines() if l.startswith("graphs compiled")]
    assert len(lines) == 1 and lines[0].split()[2] == "1", lines  # lazy: one graph for all steps
