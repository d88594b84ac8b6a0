"""The GPU-target compile check: every Triton kernel of a compiled graph compiled for a CUDA GPU
(sm_90, the H200's architecture) on a machine that has none.

CI runs coil's Triton kernels on the CPU under Triton's interpreter (TRITON_INTERPRET=1), which
executes them in NumPy and never compiles them: a kernel the GPU compiler rejects (a type
mismatch NumPy's broadcasting lets through) passes every CPU test, as torchvision's swin_t did
before it failed on an H200. Triton compiles for a GPU target without a GPU (to PTX and, with its
own ptxas, a cubin), so with the option triton_check_target="sm_90" (COIL_TRITON_CHECK=sm_90)
every module coil loads with Triton kernels is compiled for that target as it loads
(backend._compile_json). A kernel that does not compile fails the graph's compile: the graph runs
eagerly, with a CoilWarning, and coil.compiled_graphs() records eager_fallback with the reason
(TritonCheckError: the kernel, its config and Triton's error), which the tests' check() and the
fuzzer report as failures.

What is compiled is what a GPU gets: each kernel in every candidate config the compiler wrote
(XBLOCK, RBLOCK, num_warps), specialized on its argument dtypes and traced sizes as
triton_launcher.Launcher.compile_jobs does for the real GPU, calling the real
triton.language.extra.libdevice (not the interpreter's NumPy stand-in). Kernels of CPU tensors
are rendered in a form for the interpreter (exact bfloat16 rounding, ...); the compiler renders
them again as for a GPU for the check (CompileResult::triton_gpu_source), and that is the text
compiled here.

Under the interpreter, triton.jit makes interpreter functions (and so it made Triton's own tl.sum,
tl.max, ... when triton was imported), which Triton's compiler cannot compile. The kernels are
then compiled in a helper process started without TRITON_INTERPRET (this file run with --serve),
one per process, which reads requests on stdin. Results are kept per process by kernel text,
arguments, config and target: a kernel common to many graphs compiles once.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

# Every module compiled here starts with these lines: its kernels and the helpers they call
# follow. libdevice is the real one (generated modules bind a NumPy stand-in under the
# interpreter).
_HEADER = ("import triton\nimport triton.language as tl\n"
           "from triton.language.extra import libdevice\n\n\n")

_TARGET_WARP_SIZE = 32


class TritonCheckError(RuntimeError):
    """A kernel that does not compile for the target GPU (a compiler bug: coil generated it)."""

    def __init__(self, kernel: str, config: dict, target: str, error: str):
        super().__init__(f"kernel {kernel} (config {config}) does not compile for {target}: "
                         f"{error}")
        self.kernel = kernel
        self.config = config
        self.target = target
        self.error = error


def architecture(target: str) -> int:
    """90 for "sm_90"; a ValueError for anything else."""
    m = re.fullmatch(r"sm_(\d+)", target or "")
    if not m:
        raise ValueError(f"coil: a Triton check target is a CUDA architecture such as 'sm_90', "
                         f"not {target!r}")
    return int(m.group(1))


def launchers_of(module) -> list:
    """The distinct triton_launcher.Launcher objects of a generated module, in its order (a
    kernel identical to an earlier one is bound to the same launcher)."""
    from coil.triton_launcher import Launcher

    seen, out = set(), []
    for value in vars(module).values():
        if isinstance(value, Launcher) and id(value) not in seen:
            seen.add(id(value))
            out.append(value)
    return out


def check_module(module, target: str, source: str | None = None) -> None:
    """check() for every kernel of a loaded output_code module; `source`: the compiler's GPU form
    of its kernels (CompileResult::triton_gpu_source), when they were rendered for the
    interpreter."""
    check(launchers_of(module), target, source)


def check(launchers, target: str = "sm_90", source: str | None = None) -> None:
    """Compiles every kernel of `launchers` (triton_launcher.Launcher) in every candidate config
    for the CUDA architecture `target`; raises TritonCheckError for the first kernel and config
    that do not compile (in launcher order). `source`: the Python text that defines the kernels
    as @triton.jit functions (default: the module the launchers' kernels were loaded from)."""
    arch = architecture(target)
    launchers = [launcher for launcher in launchers if launcher.dtypes and "xnumel" in
                 launcher.sizes]
    if not launchers:
        return
    if source is None:
        source = _module_text(launchers[0].fn)
    functions = _jit_functions(source)
    jobs = []
    for launcher in launchers:
        name = launcher.__name__
        if name not in functions:
            raise TritonCheckError(name, {}, target, "its source is not in the module's text")
        text = _kernel_module(functions, name)
        sizes = [launcher.sizes[k] for k in ("ynumel", "xnumel", "rnumel") if k in launcher.sizes]
        for cfg in launcher.configs:
            jobs.append({
                "text": text,
                "kernel": name,
                "dtypes": [str(d).replace("torch.", "") for d in launcher.dtypes],
                "scalars": [int(v) for v in (*launcher.size_hints, *sizes)],
                "config": dict(cfg),
                "arch": arch,
            })
    errors = _compile(jobs)
    for job, error in zip(jobs, errors):
        if error is not None:
            raise TritonCheckError(job["kernel"], job["config"], target, error)


def available(target: str = "sm_90") -> str | None:
    """None when this machine can compile Triton kernels for `target`, else why not (Triton
    without its CUDA backend or ptxas, say). Checked once per process."""
    with _lock:
        if target not in _available:
            job = {"text": _HEADER + _PROBE, "kernel": "coil_check_probe",
                   "dtypes": ["float32"], "scalars": [100], "config": {"XBLOCK": 128},
                   "arch": architecture(target)}
            try:
                _available[target] = _compile_locked([job])[0]
            except Exception as e:  # noqa: BLE001 - the reason is the answer
                _available[target] = f"{type(e).__name__}: {e}"
        return _available[target]


_PROBE = """@triton.jit
def coil_check_probe(x_ptr, xnumel, XBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(x_ptr + x, libdevice.tanh(tl.load(x_ptr + x, x < xnumel)), x < xnumel)
"""

_available: dict[str, str | None] = {}


# ---- sources ----


def _module_text(fn) -> str:
    import inspect
    import linecache

    pyfn = getattr(fn, "fn", fn)
    lines = linecache.getlines(pyfn.__code__.co_filename)
    if not lines:
        lines = inspect.getsourcelines(inspect.getmodule(pyfn))[0]
    return "".join(lines)


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Attribute) and target.attr == "jit"
            and isinstance(target.value, ast.Name) and target.value.id == "triton")


def _jit_functions(source: str) -> dict:
    """The module's @triton.jit functions by name: (their text, decorators included; the names of
    module-level functions they refer to)."""
    tree = ast.parse(source)
    lines = source.splitlines(True)
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any(_is_triton_jit(d) for d in node.decorator_list):
            continue
        first = min(d.lineno for d in node.decorator_list)
        text = "".join(lines[first - 1:node.end_lineno])
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        out[node.name] = (text, names)
    return out


def _kernel_module(functions: dict, name: str) -> str:
    """A module with kernel `name` and the helpers it calls (transitively), in source order."""
    needed, todo = {name}, [name]
    while todo:
        for ref in functions[todo.pop()][1]:
            if ref in functions and ref not in needed:
                needed.add(ref)
                todo.append(ref)
    return _HEADER + "\n\n".join(text for fname, (text, _) in functions.items() if fname in needed)


# ---- compiling: in this process, or in the helper process under the interpreter ----

_lock = threading.Lock()
_results: dict[str, str | None] = {}  # job key -> None (compiles) or the error
_worker = None


def _key(job: dict) -> str:
    return hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()


def _compile(jobs: list) -> list:
    """For each job, None or the error compiling it (results cached by job)."""
    with _lock:
        return _compile_locked(jobs)


def _compile_locked(jobs: list) -> list:
    keys = [_key(job) for job in jobs]
    todo, todo_keys = [], set()
    for key, job in zip(keys, jobs):
        if key not in _results and key not in todo_keys:
            todo_keys.add(key)
            todo.append((key, job))
    if todo:
        errors = _run_jobs([job for _, job in todo])
        for (key, _), error in zip(todo, errors):
            _results[key] = error
    return [_results[key] for key in keys]


def _interpreting() -> bool:
    try:
        import triton

        return bool(triton.knobs.runtime.interpret)
    except (ImportError, AttributeError):
        return os.environ.get("TRITON_INTERPRET") == "1"


def _run_jobs(jobs: list) -> list:
    if not _interpreting():
        return [_compile_job(job) for job in jobs]
    global _worker
    if _worker is None or _worker.poll() is not None:
        _worker = _Worker()
    return _worker.run(jobs)


class _Worker:
    """The helper process (this file with --serve, without TRITON_INTERPRET): one JSON line of
    jobs in, one JSON line of results out."""

    def __init__(self):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve"], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        atexit.register(self.close)

    def poll(self):
        return self.proc.poll()

    def run(self, jobs: list) -> list:
        try:
            self.proc.stdin.write(json.dumps(jobs) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            self.proc.wait()
            self.log.seek(0)
            raise RuntimeError(f"coil: the Triton check's helper process exited "
                               f"({self.proc.returncode}): {self.log.read()[-3000:]}")
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.stdout.close()
        self.log.close()


_modules: dict[str, dict] = {}  # kernel module text -> its namespace (in the compiling process)


def _compile_job(job: dict) -> str | None:
    """Compiles one job as JITFunction.run would at a launch (the binder's specialization of the
    arguments, the backend's options), for GPUTarget("cuda", arch); None or the error."""
    try:
        import linecache

        import torch
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, make_backend
        from triton.runtime.jit import MockTensor, create_function_from_signature

        text = job["text"]
        ns = _modules.get(text)
        if ns is None:
            # triton.jit reads each function's source through linecache.
            filename = f"<coil triton check {hashlib.sha256(text.encode()).hexdigest()[:16]}>"
            linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
            ns = {"__name__": "coil_triton_check"}
            exec(compile(text, filename, "exec"), ns)
            _modules[text] = ns
        fn = ns[job["kernel"]]
        target = GPUTarget("cuda", job["arch"], _TARGET_WARP_SIZE)
        backend = make_backend(target)
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        args = [MockTensor(getattr(torch, d)) for d in job["dtypes"]] + list(job["scalars"])
        kwargs = dict(job["config"])
        kwargs["debug"] = bool(fn.debug) or triton.knobs.runtime.debug
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound,
                                                              specialization, options)
        triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                       options=options.__dict__)
        return None
    except Exception as e:  # noqa: BLE001 - the error is the result
        # A CompilationError shows the kernel's line; those it was caused by, the line of each
        # helper called, and the innermost error what is wrong.
        text, cause, seen = f"{type(e).__name__}: {e}", e.__cause__ or e.__context__, 0
        while cause is not None and seen < 8:
            text += f"\n(caused by {type(cause).__name__}: {cause})"
            cause, seen = cause.__cause__ or cause.__context__, seen + 1
        return text if len(text) <= 6000 else text[:3000] + "\n...\n" + text[-3000:]


def _serve() -> None:
    # The protocol has stdout to itself: anything else printed goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        if line.strip():
            out.write(json.dumps([_compile_job(job) for job in json.loads(line)]) + "\n")
            out.flush()


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    # Run as a file: its own folder (python/coil) is first on sys.path, where names such as
    # config.py and runtime.py would shadow other packages' modules.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    _serve()
