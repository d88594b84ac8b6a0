"""coil's benchmark suite: eager vs Inductor vs coil, side by side in one process.

    python -m coil.bench --quick --out /tmp/bench_cpu          # this machine's CPU, fp32
    python -m coil.bench --device cuda --quick --out /tmp/gpu  # the GPU, bf16

Per case: median milliseconds of each backend (interleaved repetitions, warm-up excluded),
speedups, achieved bandwidth against the copy bandwidth measured in the same run, kernel counts,
and a correctness check against eager; compile time cold and warm in fresh processes, with coil's
own phases. Writes results.json, results.md, speedup.png and compile_time.png.

Modules: cases (what is measured), timing (running one case), compile_time (cold/warm compiles in
child processes), report (JSON and Markdown), plots (PNG), suite (the command line; __main__
only calls it).
"""

from coil.bench.suite import main, run

__all__ = ["main", "run"]
