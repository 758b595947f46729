"""What every example shows a user: a one-line progress bar (step, loss, steps/s) and a loss-curve
PNG. Reading the loss for the bar is a sync on "lazy", so the bar reads it only every
`every` steps, after the step's graph has run (a value already computed: nothing is recompiled)."""
import sys
import time


class Progress:
    def __init__(self, total, label, every=10, stream=sys.stdout):
        self.total, self.label, self.every, self.stream = total, label, max(1, every), stream
        self.t0 = time.perf_counter()
        self.interactive = stream.isatty()

    def update(self, step, loss_tensor):
        """Called after each step with the step's loss tensor (0-based step)."""
        done = step + 1
        if done % self.every and done != self.total:
            return
        loss = loss_tensor.item()
        rate = done / max(time.perf_counter() - self.t0, 1e-9)
        width = 30
        filled = int(width * done / self.total)
        bar = "#" * filled + "." * (width - filled)
        line = f"{self.label} [{bar}] {done:5d}/{self.total}  loss {loss:.4f}  {rate:6.1f} steps/s"
        if self.interactive:
            end = "\n" if done == self.total else ""
            self.stream.write("\r" + line + end)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def steady_rate(steps, seconds, first_step_s):
    """Steps per second after the first step (which includes the compile on "lazy")."""
    if steps > 1 and seconds > first_step_s:
        return (steps - 1) / (seconds - first_step_s)
    return float("nan")


def timing_line(device, steps, r):
    """The run's one-line timing summary from train()'s result dict."""
    return (f"{device}: {steps} steps in {r['seconds']:.2f} s (first step {r['first_step_s'] * 1e3:.0f} ms "
            f"incl. compile; then {r['steps_per_s']:.1f} steps/s)")


def save_loss_curve(losses, path, title):
    """Writes a PNG of the loss per step; returns the path, or None when matplotlib is missing
    (requirements.txt installs matplotlib into .venv; a message says so otherwise)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no loss curve; pip install matplotlib)")
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(range(1, len(losses) + 1), losses, linewidth=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
