"""coil's benchmark suite: eager vs Inductor vs coil, side by side in one process.

    python -m coil.bench --quick --out /tmp/bench_cpu          # this machine's CPU, fp32
    python -m coil.bench --device cuda --quick --out /tmp/gpu  # the GPU, bf16

Per case: median milliseconds of each backend (interleaved repetitions, warm-up excluded),
speedups, achieved bandwidth against the copy bandwidth measured in the same run, kernel counts,
and a correctness check against eager; compile time cold and warm in fresh processes, with coil's
own phases. Writes results.json, results.md, speedup.png and compile_time.png.

Modules: cases (what is measured), vision (the vision models), timing (running one case),
compile_time (cold/warm compiles in child processes), report (JSON, Markdown, merging split runs),
plots (PNG), suite (the command line; __main__ only calls it); perf_cases (the performance
fuzzer's stored programs as cases); zoo, zoo_models, zoo_report (the model population sweep,
`python -m coil.bench.zoo`: docs/zoo.md).
"""

__all__ = ["main", "run"]


def __getattr__(name):
    # lazy, so that `python -m coil.bench.report` does not find its module already imported
    if name in __all__:
        from coil.bench import suite

        return getattr(suite, name)
    raise AttributeError(name)
