"""How the side-by-side benchmarks time a contender, in one place so every contender and every
script is timed the same way: median of rounds, time.perf_counter around the round."""
import statistics
import time


def median_us_per_call(f, n=3000, rounds=5, warmup=0, sync=lambda: None):
    """Median over `rounds` of the microseconds per call of `f` in a loop of `n` calls, after
    `warmup` calls; `sync()` before and after each round (a lazy contender's pending work)."""
    for _ in range(warmup):
        f()
    times = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        times.append((time.perf_counter() - t0) / n * 1e6)
        sync()
    return statistics.median(times)


def median_ms_per_step(step, steps, rounds):
    """Median over `rounds` of the milliseconds per step of `steps` steps back to back; one read
    of the last step's loss ends each round (it waits for a lazy or GPU contender's work)."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = step()
        loss.item()
        times.append((time.perf_counter() - t0) / steps * 1e3)
    return statistics.median(times)
