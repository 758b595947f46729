"""examples/python/demo.py (what `make demo` runs) works, on a small problem."""
import importlib.util
import pathlib

DEMO = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "demo.py"


def test_demo_runs_and_reports(capsys):
    spec = importlib.util.spec_from_file_location("lt_demo", DEMO)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    demo.SHAPE, demo.STEPS = (8, 16), 3
    demo.main()
    out = capsys.readouterr().out
    assert "graphs compiled" in out and "lazytensor metrics" in out
    assert "same random inputs on both devices: True" in out
