"""The vector form of C++ kernels (issue 12: codegen/cpp/cpp_vec.h, at::vec): every op family with
a vector form, computed in vector loops and compared with eager; sizes that leave a masked tail;
uniform values broadcast; strided and transposed reads; and checks that the hot loop really is
vector code (the kernel's text and the built library), not a timing."""

import os
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import (
    BACKEND,
    check,
    coil_records,
    kernel_text,
    make_input,
    make_tensor,
    reset_compiler,
)

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's C++ kernels")

F32, F64 = torch.float32, torch.float64


# (4, 37): 37 lanes leave a tail of 5 (AVX-512) or 5 (AVX2) in every row.
SHAPE = (4, 37)

UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "log": lambda x: torch.log(x.abs() + 0.5),
    "log2": lambda x: torch.log2(x.abs() + 0.5),
    "log1p": lambda x: torch.log1p(x.abs()),
    "expm1": torch.expm1,
    "sqrt": lambda x: torch.sqrt(x.abs()),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": lambda x: torch.tan(x * 0.5),
    "asin": lambda x: torch.asin(x.clamp(-0.9, 0.9)),
    "acos": lambda x: torch.acos(x.clamp(-0.9, 0.9)),
    "atan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "erf": torch.erf,
    "sigmoid": torch.sigmoid,
    "floor": lambda x: torch.floor(x * 3),
    "ceil": lambda x: torch.ceil(x * 3),
    "round": lambda x: torch.round(x * 4),  # halves: round half to even
    "trunc": lambda x: torch.trunc(x * 3),
    "reciprocal": lambda x: torch.reciprocal(x.abs() + 0.5),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "relu": torch.relu,
    "softplus": F.softplus,
    "hardswish": F.hardswish,
    "nan_to_num": lambda x: torch.nan_to_num(torch.log(x)),
}


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, dtype, vectorize):
    check(UNARY[name], make_tensor(SHAPE, dtype))


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 0.5),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "pow": lambda a, b: torch.pow(a.abs() + 0.1, b),
    "atan2": torch.atan2,
    "where_lt": lambda a, b: torch.where(a < b, a, b * 2),
    "where_ge_scalar": lambda a, b: torch.where(a >= 0.25, a, 0.0),
    "compare_and": lambda a, b: ((a > 0) & (b < 0)).float() * a,
    "compare_or": lambda a, b: torch.where((a == b) | (a != a * 2), a, b),
    "clamp": lambda a, b: torch.clamp(a, -0.5, 0.5) + b,
    "lerp": lambda a, b: torch.lerp(a, b, 0.3),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, vectorize):
    check(BINARY[name], make_tensor(SHAPE), make_tensor(SHAPE))


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_ops_on_nan_and_infinities(name, dtype, vectorize):
    # In vector loops (and in scalar code, which computes such functions on one lane of at::vec):
    # at::vec's exp_u20 gave inf for a NaN (eager: NaN), in float32 kernels of 4096+ elements.
    special = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 3.0, 0.5]
    x = torch.tensor((special * 5)[:37], dtype=dtype).reshape(1, 37).repeat(4, 1)
    if name == "gelu" and dtype == F32:
        # Eager's float32 GELU is oneDNN's on AVX-512 machines, which gives NaN for +inf (its
        # float64 GELU and AVX2 float32 GELU give inf): against eager's float64 instead.
        torch.testing.assert_close(
            torch.compile(F.gelu, backend=BACKEND)(x), F.gelu(x.double()).float(), equal_nan=True
        )
        return
    check(UNARY[name], x)


@pytest.mark.parametrize("name", ["erf", "sigmoid", "gelu", "silu"])
def test_exp_based_functions_match_eager_across_their_range(name, vectorize):
    # float32 erf and sigmoid take exp from at::vec's exp_u20 (erf: coil_erf, at::vec's formula
    # otherwise), not SLEEF's: as close to eager as at::vec's erf (its formula is within 5e-7 of
    # erf; eager's within 1 ulp) everywhere, at magnitudes where exp(-x^2) or exp(-x) falls below
    # FLT_MIN, and at tiny and signed zeros.
    dense = torch.linspace(-12.0, 12.0, 1 << 16)
    tiny = torch.tensor([1e-30, -1e-30, 1e-8, -1e-8, 1e-4, -1e-4, 0.0, -0.0])
    x = torch.cat([dense, tiny, torch.linspace(-120.0, 120.0, 4093)]).reshape(1, -1)
    # (On AVX-512 machines eager's GELU is oneDNN's, with a 1-ulp erf: the formula's 5e-7 in
    # erf is up to 1.2e-6 in x * erf(x / sqrt(2)) / 2 there.)
    check(UNARY[name], x, atol=1.5e-6 if name == "gelu" else 6e-7, rtol=5e-7)


def test_nan_propagates_through_max_and_maximum(vectorize):
    x = make_tensor(SHAPE)
    x[1, 30] = float("nan")  # in the tail of its row
    x[2, 3] = float("nan")
    check(lambda t: (t.amax(-1), t.amin(-1), torch.maximum(t, t.flip(0)), t.max(-1).values), x)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(3, 1031), (5, 16), (2, 9)], ids=["1031", "16", "9"])
def test_row_reductions(shape, dtype, vectorize):
    check(
        lambda t: (t.sum(-1), t.amax(-1), t.amin(-1), t.mean(-1), t.prod(-1), t.var(-1)),
        make_tensor(shape, dtype, domain="unit"),
        atol=1e-4,
        rtol=1e-5,
    )


def test_sum_of_everything_splits_across_threads(vectorize):
    # One value from 2^17 elements: the vector sums are split between threads (omp reduction on
    # vectors), and the tail is masked.
    check(lambda t: (t.sum(), (t * t).sum()), make_tensor((131072 + 3,)), atol=1e-2, rtol=1e-4)


def test_multi_dim_reduction(vectorize):
    check(lambda t: (t.sum((0, 2)), t.amax((0, 2))), make_tensor((3, 5, 41)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
def test_row_ops(name, vectorize):
    ops = {
        "softmax": lambda t: torch.softmax(t, -1),
        "log_softmax": lambda t: torch.log_softmax(t, -1),
        "layer_norm": lambda t: F.layer_norm(t, (t.shape[-1],)),
        "rms_norm": lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6),
    }
    check(ops[name], make_tensor((6, 77)), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided", "offset"])
def test_input_layouts(kind, vectorize):
    a = make_input(kind, (8, 37))
    b = make_input(kind, (8, 37))
    check(lambda x, y: torch.tanh(x) * y + x.t().sum(1), a, b)


def _rope(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1) * 0.5 + x


def _select_scatter(x, y):
    z = torch.zeros(3, 37, 5)
    return torch.select_scatter(z, x, 0, 1) + torch.select_scatter(z, y, 0, 2)


PIECES = {
    # name: (fn, inputs, where the innermost loop splits)
    "cat": (lambda a, b, c: torch.cat([a * 2, b + 1, c], 1), [(6, 37), (6, 5), (6, 100)], "37 42"),
    "cat_flat": (lambda a, b: torch.cat([a.exp(), b]), [(1000,), (3001,)], "1000"),
    "rope": (_rope, [(4, 3, 64)], "32"),
    "pad": (lambda x: F.pad(x, (3, -2)) * 3, [(5, 40)], "3"),
    "pad_both_dims": (lambda x: F.pad(x, (1, 2, 2, 1), value=0.5), [(4, 6, 33)], "1 34"),
    "slice_scatter": (
        lambda x, y: torch.slice_scatter(x, y * 2, 1, 8, 24) + 1,
        [(5, 40), (5, 16)],
        "8 24",
    ),
    "select_scatter": (_select_scatter, [(37, 5), (37, 5)], None),
    "stack_last": (lambda a, b: torch.stack([a, b.sin()], -1).flatten(-2), [(7, 19), (7, 19)], None),
    "arange_mask": (lambda x: torch.where(torch.arange(50) < 20, x, -x), [(3, 50)], "20"),
    "tril": (lambda x: torch.tril(x) + 1, [(24, 24)], None),
}


@pytest.mark.parametrize("dtype", [F32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(PIECES))
def test_loops_split_where_index_comparisons_change(name, dtype, vectorize, debug):
    # A pointwise kernel's innermost loop is split where comparisons of index values along it
    # change (ir/fold.h): each piece of a concatenation or pad reads only its own input, in
    # vector form, with no per-element select. Pieces of every length (tails included) against
    # eager; and the split named in the kernel's header.
    fn, shapes, cuts = PIECES[name]
    check(fn, *[make_tensor(s, dtype) for s in shapes])
    text = kernel_text(debug)
    if cuts is not None:
        assert re.search(r"loop x\d+ split at " + cuts + r" \(", text), text
        body = text.split("// cpp_fused", 1)[1]
        assert "? in_ptr" not in body, text  # no masked load left


def test_a_split_loop_whose_piece_has_no_vector_form_stays_whole_and_scalar(vectorize, debug):
    # The piece over the float64 input has no vector form (float32 and float64 lanes in one
    # loop): the attempt falls back to the scalar loop, unsplit, and the header does not claim
    # a split it did not make.
    a = make_tensor((6, 37))
    b = torch.randn(6, 11, dtype=torch.float64)
    check(lambda a, b: torch.cat([a * 2, b.float()], 1), a, b)
    text = kernel_text(debug)
    assert "split at" not in text and "scalar (omp simd): float32 and float64" in text, text


def test_transposed_output_and_inputs(vectorize):
    check(lambda x, y: (x.t() + y).t().contiguous() * 2, make_tensor((40, 33)), make_tensor((33, 40)))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape", [(256, 128), (200, 45), (33, 300), (131, 263), (140, 600)],
                         ids=["even", "odd", "short", "ragged", "whole_and_part"])
def test_tiled_transposes(shape, dtype, vectorize, debug):
    # Tiles of 512x64, full and partial, with edges that are not whole 8x8 register blocks: the
    # transposed read goes through a transposed tile (coil_transpose_tile: register blocks, then
    # the edges element by element).
    a, b = make_tensor(shape, dtype), make_tensor(shape[::-1], dtype)
    check(lambda x, y: torch.sigmoid(x.t()) + y * 2, a, b)
    text = kernel_text(debug)
    ty = "float" if dtype == F32 else "double"
    assert f"coil_transpose_tile<{ty}>(" in text and "'s tile, transposed" in text, text
    # y, read along the tile's rows, is fetched 16 rows ahead (emit_tile_row_prefetches).
    assert "tile prefetch: each row of a tile fetches the runs of arg" in text, text
    assert re.search(r"coil_prefetch\(in_ptr\d, \d+\*x0 \+ xt1 \+ \d+\);", text), text


def test_embedding_rows(vectorize):
    w = make_tensor((50, 40))
    idx = torch.randint(0, 50, (3, 7))
    check(lambda i, w: F.embedding(i, w) * 2 + 1, idx, w)


def test_mixed_with_scalar_dtypes(vectorize):
    # int and bool values keep their loop scalar; the kernel still computes eager's values.
    x = make_tensor(SHAPE)
    i = torch.randint(-5, 5, SHAPE)
    check(lambda x, i: (x * i, (x > 0).sum(-1), x.argmax(-1), i.cumsum(-1)), x, i)


HALF_OPS = {
    "exp": lambda t: torch.exp(t) * 2,
    "softmax": lambda t: torch.softmax(t, -1),
    "sum_f32": lambda t: t.float().sum(-1),
    "maximum": lambda t: torch.maximum(t, -t),
    "to_f32": lambda t: (t * 3).to(torch.float32),
    "gelu": F.gelu,
    "transpose": lambda t: t.t().contiguous() + 1,
    "layer_norm": lambda t: F.layer_norm(t, (t.shape[-1],)),
    "from_f32": lambda t: (t.float() * 1.7).to(t.dtype),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", list(HALF_OPS))
def test_16_bit_floats_convert_in_registers(name, dtype, vectorize, debug):
    # Loaded and widened to float lanes, rounded where eager rounds, narrowed where stored.
    check(HALF_OPS[name], make_tensor((24, 37), dtype), atol=1e-2, rtol=1e-2)
    text = kernel_text(debug)
    assert "vectorized (at::vec VecF" in text, text
    if name not in ("transpose", "sum_f32", "to_f32"):
        assert "coil_vload_half<" in text and "coil_vstore_half<" in text, text


def test_dynamic_sizes(vectorize):
    def f(x):
        return torch.softmax(x, -1) * torch.erf(x)

    reset_compiler()
    compiled = torch.compile(f, backend=BACKEND, dynamic=True)
    for n in (9, 37, 64, 100):
        x = make_tensor((3, n))
        torch.testing.assert_close(compiled(x), f(x))
    assert any(r.dynamic for r in coil_records())


# ---- the hot loop is vector code ----


def _built_library(cache_dir, *markers: str) -> bytes:
    """The newest kernel library in the cache whose source contains every marker."""
    libs = []
    for root, _, files in os.walk(cache_dir):
        if "kernel.so" in files and "kernel.cpp" in files:
            source = open(os.path.join(root, "kernel.cpp")).read()
            if all(m in source for m in markers):
                libs.append(os.path.join(root, "kernel.so"))
    assert libs, f"no kernel library with {markers!r} in {cache_dir}"
    return open(max(libs, key=os.path.getmtime), "rb").read()


def test_gelu_chain_kernel_is_vector_code(vectorize, debug):
    import coil

    reset_compiler()
    x, y, z = (make_tensor((64, 1024)) for _ in range(3))
    f = torch.compile(lambda x, y, z: F.gelu(x * y + z).relu() * torch.exp(-x), backend=BACKEND)
    torch.testing.assert_close(f(x, y, z), F.gelu(x * y + z).relu() * torch.exp(-x))
    text = kernel_text(debug)
    assert "// decision: loop x1 vectorized (at::vec VecF, a masked tail)" in text, text
    body = text.split("// cpp_fused", 1)[1]
    assert "coil_erf(" in body and "coil_exp_u20(" in body and "VecF::loadu(" in body, text
    assert "std::erf" not in body and "std::exp" not in body, text
    # The built library: nothing calls libm's scalar erff or expf once per element, nor SLEEF's
    # exp (coil_erf and exp_u20 are inline polynomials), and tanh is SLEEF's 16- or 8-lane
    # function.
    data = _built_library(coil.config.options.cache_dir, "coil_erf(", "coil_exp_u20(", "VecF::loadu(")
    assert b"\x00erff\x00" not in data and b"\x00expf\x00" not in data
    assert b"Sleef_expf8_u10" not in data and b"Sleef_expf16_u10" not in data
    torch.compile(lambda x: torch.tanh(x) * 2.75, backend=BACKEND)(x)
    data = _built_library(coil.config.options.cache_dir, ".tanh()", "VecF(2.75f)")
    if torch.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2"):
        assert b"Sleef_tanhf16_u10" in data or b"Sleef_tanhf8_u10" in data
    assert b"\x00tanhf\x00" not in data


def test_auto_keeps_small_kernels_scalar_and_vectorizes_large_ones(monkeypatch, debug):
    import coil

    monkeypatch.setattr(coil.config.options, "cpp_vectorize", "auto")
    reset_compiler()
    f = torch.compile(lambda t: torch.exp(t) + 1, backend=BACKEND)
    f(make_tensor((4, 8)))
    small = kernel_text(debug)
    assert "vectorized" not in small and "#pragma omp simd" in small, small
    f(make_tensor((64, 256)))
    large = kernel_text(debug)
    assert "vectorized (at::vec" in large, large


def test_vectorize_off_leaves_scalar_loops(monkeypatch, debug):
    import coil

    monkeypatch.setattr(coil.config.options, "cpp_vectorize", "off")
    reset_compiler()
    check(lambda t: torch.tanh(t) * 2, make_tensor((64, 256)))
    text = kernel_text(debug)
    assert "VecF" not in text.split("// cpp_fused", 1)[1] and "#pragma omp simd" in text


def test_unknown_vectorize_value_is_an_error():
    import coil

    before = coil.config.options.cpp_vectorize
    with pytest.raises(Exception, match="cpp_vectorize='always'"):
        torch.compile(lambda t: t + 1, backend="coil", options={"cpp_vectorize": "always"})(
            torch.ones(2)
        )
    assert coil.config.options.cpp_vectorize == before  # options= changes nothing global


def test_machines_where_vector_kernels_do_not_build_get_scalar_kernels(monkeypatch, debug):
    # A compiler that cannot build at::vec kernels (the probe in runtime.vec_flags fails): one
    # warning, and every graph still compiles, with scalar loops.
    import coil
    from coil import backend, runtime

    monkeypatch.setattr(runtime, "vec_flags", lambda: None)
    monkeypatch.setattr(backend, "_vec_warned", False)
    reset_compiler()
    f = torch.compile(lambda t: torch.tanh(t) * 3, backend=BACKEND)
    x = make_tensor((64, 256))
    with pytest.warns(coil.CoilWarning, match="do not build"):
        torch.testing.assert_close(f(x), torch.tanh(x) * 3)
    assert not any(r.eager_fallback for r in coil_records())
    assert "VecF" not in kernel_text(debug).split("// cpp_fused", 1)[1]


def test_vector_kernels_build_here():
    # The probe passes on this machine (CI's): the vector forms above are really built and run.
    from coil import runtime

    assert runtime.vec_flags() is not None


# A column sum with too few columns to share out (one block of x points) splits its rows across
# threads: an OpenMP array reduction of the block's accumulators. Max keeps one thread (OpenMP's
# max combiner drops NaN); a block wide enough for every thread keeps the x loop parallel.
@pytest.mark.parametrize("op", ["sum", "mean", "amax"])
def test_narrow_column_reduction_splits_rows_across_threads(op, debug):

    x = torch.randn(8192, 16, dtype=torch.float64)
    x[5, 3] = float("nan") if op == "amax" else x[5, 3]
    f = {"sum": lambda t: t.sum(0), "mean": lambda t: t.mean(0),
         "amax": lambda t: t.amax(0)}[op]
    out = torch.compile(f, backend="coil")(x)
    torch.testing.assert_close(out, f(x), equal_nan=True)
    text = kernel_text(debug)
    split = "#pragma omp parallel for reduction(+:acc_" in text
    assert split == (op != "amax"), text
    if op == "amax":
        assert "#pragma omp parallel for" in text  # over x, as before


def test_column_sum_of_whole_rows_splits_rows_and_reads_four_at_a_time(debug):
    """A column sum over rows of up to 16384 points takes the whole row as its block and splits
    the rows across threads (each thread streams its own rows), reading 4 rows per pass with a
    tail of one row at a time (515 rows: 3 left over)."""
    x = torch.randn(515, 200)
    out = torch.compile(lambda t: t.sum(0), backend="coil")(x)
    torch.testing.assert_close(out, x.sum(0), rtol=1e-5, atol=1e-4)
    text = kernel_text(debug)
    assert "#pragma omp parallel for reduction(+:acc_buf0[:200])" in text, text
    assert "r0u += 4" in text, text


def test_wide_column_reduction_keeps_x_parallel(debug):
    """Rows over 16384 points keep blocks of 1024 columns, parallel over the blocks."""
    x = torch.randn(10, 20000)
    out = torch.compile(lambda t: t.sum(0), backend="coil")(x)
    torch.testing.assert_close(out, x.sum(0), rtol=1e-5, atol=1e-4)
    text = kernel_text(debug)
    assert "reduction(+:acc_" not in text and "#pragma omp parallel for" in text, text
    assert "1024 x points at a time" in text, text


# Long float sums run in chunks with accumulators of their own, as eager's and Inductor's are
# cascaded: without, sums over 2^20 rows were 10-100x less accurate than eager's and failed
# torch's default tolerance against it. Scalar, vector and column forms; the chunked form shows.
@pytest.mark.parametrize("vectorize", ["on", "off"])
@pytest.mark.parametrize("case", ["rows", "columns", "all", "mean_columns"])
def test_long_float_sums_match_eager_at_default_tolerance(case, vectorize, debug, monkeypatch):
    import coil

    monkeypatch.setattr(coil.config.options, "cpp_vectorize", vectorize)
    torch.manual_seed(0)
    shape, f = {
        "rows": ((8, 1 << 18), lambda t: t.sum(1)),
        "columns": ((1 << 18, 16), lambda t: t.sum(0)),
        "all": ((1 << 20,), lambda t: t.sum()),
        "mean_columns": ((1 << 14, 64), lambda t: t.mean(0)),
    }[case]
    x = torch.randn(shape) + 1.0
    out = torch.compile(f, backend="coil")(x)
    torch.testing.assert_close(out, f(x))  # torch's default float32 tolerance
    assert "r0c += " in kernel_text(debug)


# Row caches (codegen/cpp/cpp_row_cache.cpp): an expensive value that a later loop over the same
# row computes again is computed once, kept in the later loop's output elements until it writes
# them. Softmax computed exp(x - max) twice per element (summed, then scaled); eager's kernel
# computes it once. A bfloat16 output cannot hold the float32 value: computed again, and the
# output keeps the row's input instead, read by all three loops (a value may be kept for every
# later loop that computes it).
@pytest.mark.parametrize("dtype", [F32, F64, torch.bfloat16])
@pytest.mark.parametrize("mode", ["on", "off"])
def test_softmax_computes_each_exponential_once(dtype, mode, monkeypatch, debug):
    import coil

    monkeypatch.setattr(coil.config.options, "cpp_vectorize", mode)
    x = torch.randn(33, 1003, dtype=dtype) * 4  # 1003: a masked vector tail in every row
    out = torch.compile(lambda t: torch.softmax(t, -1), backend="coil")(x)
    torch.testing.assert_close(out, torch.softmax(x, -1))
    text = kernel_text(debug).split("// cpp_fused", 1)[1]
    cached = dtype != torch.bfloat16
    assert ("row cache: each element's exp" in text) == cached, text
    assert ("row cache: each element's load from stage 0" in text) == (not cached), text
    exps = (len(re.findall(r"\.exp\(\)|coil_exp_u20\(", text)) if mode == "on"
            else text.count("std::exp("))
    per_loop = 2 if mode == "on" else 1  # the vector loop is written twice (its tail)
    assert exps == per_loop * (1 if cached else 2), text


def test_a_row_cache_spans_several_reduced_dims(debug):
    # A softmax written out over two dims, without the max: the r loops are [7, 300], and the
    # output's elements hold the exponentials between the loops.
    x = torch.randn(6, 7, 300)

    def f(t):
        e = torch.exp(t * 0.5)
        return e / e.sum((1, 2), keepdim=True)

    out = torch.compile(f, backend="coil")(x)
    torch.testing.assert_close(out, f(x))
    assert "row cache" in kernel_text(debug)


def test_a_row_cache_is_not_kept_in_memory_the_output_takes_over(debug):
    # softmax(x) + w, with w a product read only by the third loop and dead after it: the output
    # takes w's memory in place, so the second loop cannot keep its exponentials there (the third
    # would read them as w: wrong values when it did).
    def f(x, y, z, w2):
        w = y @ z
        return (torch.softmax(x, -1) + w) @ w2

    args = (torch.randn(64, 512), torch.randn(64, 32), torch.randn(32, 512), torch.randn(512, 8))
    out = torch.compile(f, backend="coil")(*args)
    torch.testing.assert_close(out, f(*args))
    graphs = [d for d in os.listdir(debug)]
    schedule = "".join(open(os.path.join(debug, d, "schedule.txt")).read() for d in graphs)
    assert "in place of" in schedule, schedule  # the case this test is about
    assert "row cache" not in kernel_text(debug)


@pytest.mark.parametrize("dtype", [F32, torch.bfloat16])
def test_rms_norm_keeps_its_input_in_the_output_between_its_loops(dtype, debug):
    # The sum of squares and the output loop both read x: the first also stores it in the output
    # (the same type), the second reads it back there. bfloat16 values are kept exactly.
    def f(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w

    x, w = torch.randn(40, 777, dtype=dtype), torch.randn(777, dtype=dtype)
    out = torch.compile(f, backend="coil")(x, w)
    torch.testing.assert_close(out, f(x, w))
    assert "row cache: each element's load from stage 0" in kernel_text(debug)


def test_softmax_over_a_dead_product_writes_over_it_and_keeps_its_exponentials(debug):
    # Attention's scores are read by the softmax's three loops and dead after it: each row is
    # written over in place once its loops have read it (an earlier stage at the same element
    # counts as before the store), and the exponentials are kept there between the last two loops
    # (nothing reads the scores after the second).
    def f(q, k, v):
        s = torch.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1)
        return s @ v

    q, k, v = (torch.randn(2, 4, 64, 32) for _ in range(3))
    # (Written out attention is otherwise one attention call: test_attention_pattern.py.)
    out = torch.compile(f, backend="coil", options={"attention_rewrite": False})(q, k, v)
    torch.testing.assert_close(out, f(q, k, v))
    schedule = "".join(open(os.path.join(r, "schedule.txt")).read()
                       for r, _, files in os.walk(debug) if "schedule.txt" in files)
    assert "in place of" in schedule, schedule
    assert "row cache: each element's exp" in kernel_text(debug)


@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_row_cache_of_a_buffer_the_first_loop_computes(mode, monkeypatch, debug):
    # p's body is long enough to be stored: the first loop computes and stores it (and sums it
    # from the variable holding it), the second loop reads p back. That read is kept in the
    # output's elements; the first loop must store it there from that variable too (it once did
    # not: the output was NaN).
    import coil

    monkeypatch.setattr(coil.config.options, "cpp_vectorize", mode)

    def f(x):
        p = x
        for _ in range(20):
            p = (p * 1.01 + 0.1).sin()
        return p / p.sum(-1, keepdim=True)

    x = torch.randn(64, 300)
    out = torch.compile(f, backend="coil")(x)
    torch.testing.assert_close(out, f(x))
    assert "row cache: each element's load from stage 0" in kernel_text(debug)


def test_vector_flags_are_found_while_dynamo_traces(monkeypatch):
    # The backend starts runtime.vec_flags (the precompiled at::vec header: about 4 s on a fresh
    # cache) on a thread when a graph with CPU tensors arrives, so it overlaps AOTAutograd's
    # trace; the compile's own call waits for that answer instead of building it again.
    from coil import runtime

    calls = []
    monkeypatch.setattr(runtime, "_vec_warmer", None)
    real = runtime.vec_flags
    monkeypatch.setattr(runtime, "vec_flags", lambda: calls.append(1) or real())
    reset_compiler()
    x = make_tensor((64, 128))
    check(lambda x: torch.softmax(x * 2, -1), x)
    warmer = runtime._vec_warmer
    assert warmer is not None and warmer.name == "coil-vec-flags"
    warmer.join()
    assert len(calls) >= 2  # the warm-up's call and the compile's
    runtime.prepare_vec_flags()  # once per process: no second thread
    assert runtime._vec_warmer is warmer


# Column kernels (reductions whose reduced dim is not the innermost one: reads contiguous along
# x, strided along r) in vector form: each loop over a block of x points is a vector loop, the
# per-lane accumulators and per-x-point values loaded and stored a vector at a time. Their lanes
# were scalar loops that computed an exponential a lane at a time: log_softmax(x, 0) at
# 1024x2048 float32 took 25 ms where Inductor took 2.1 (2026-12-04). Block widths that leave a
# tail (37, 200, 1030 columns), several reduced dims, 16-bit floats, NaN in a max.
COLUMN_OPS = {
    "softmax": lambda x, d: torch.softmax(x, d),
    "log_softmax": lambda x, d: torch.log_softmax(x, d),
    "sum": lambda x, d: x.sum(d),
    "amax": lambda x, d: x.amax(d),
    "amin": lambda x, d: (x * 2).amin(d),
    "var_mean": lambda x, d: torch.var_mean(x, d),
    "logsumexp": lambda x, d: torch.logsumexp(x, d),
    "norm": lambda x, d: torch.linalg.vector_norm(x, 2, d),
    "prod": lambda x, d: (x * 0.1 + 1).prod(d),
    "layer_norm_like": lambda x, d: (x - x.mean(d, keepdim=True)) * torch.rsqrt(
        x.var(d, keepdim=True) + 1e-5),
}


@pytest.mark.parametrize("name", list(COLUMN_OPS))
@pytest.mark.parametrize("shape, dim", [((33, 37), 0), ((6, 19, 200), 1), ((9, 1030), 0),
                                        ((9, 7, 40), (0, 1))])
def test_column_reductions_in_vector_form(name, shape, dim, vectorize, debug):
    if name in ("prod", "softmax", "log_softmax") and isinstance(dim, tuple):
        dim = dim[0]
    x = make_tensor(shape)
    check(lambda t: COLUMN_OPS[name](t, dim), x, atol=1e-4, rtol=1e-4)
    text = kernel_text(debug)
    assert "x points at a time, innermost" in text, text
    assert re.search(r"decision: loop x\d vectorized", text), text
    assert "for (int64_t xi = 0; xi < xn; ++xi) {" not in text, text  # no scalar lane loop


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_column_softmax_of_16_bit_floats_in_vector_form(dtype, vectorize, debug):
    x = make_tensor((24, 3, 40), dtype=dtype)
    check(lambda t: torch.softmax(t, 0) * 2, x)
    check(lambda t: t.float().log_softmax(1).to(dtype), x)
    assert re.search(r"decision: loop x\d vectorized", kernel_text(debug))


def test_column_max_propagates_nan_in_vector_form(vectorize, debug):
    x = make_tensor((50, 37))
    x[7, 3] = float("nan")
    x[0, 36] = float("nan")
    check(lambda t: t.amax(0) + t.softmax(0).sum(0), x)
    assert re.search(r"decision: loop x\d vectorized", kernel_text(debug))


def test_column_arg_reduction_of_float64_stays_scalar_and_says_why(vectorize, debug):
    # (float32 and 16-bit column arg-reductions have a vector form: test_cpu_short_loops.py.)
    x = make_tensor((50, 37), F64)
    check(lambda t: t.argmax(0), x)
    text = kernel_text(debug)
    assert "scalar (omp simd): argmax reduction over float64 lanes" in text, text


def test_column_reduction_of_a_cat_splits_its_vector_lanes(vectorize, debug):
    a, b = make_tensor((40, 20)), make_tensor((40, 17))
    check(lambda s, t: torch.cat([s, t.exp()], 1).softmax(0), a, b)
    text = kernel_text(debug)
    assert "lanes of x0 split at 20" in text, text
    assert re.search(r"decision: loop x\d vectorized", text), text


# Arg-reductions along the row in vector form (prelude.h coil_varg_step): each lane keeps its
# best value and first position; the lanes then give eager's answer (a NaN's first position, else
# the first position of the best). Ties everywhere (small integers), NaN, rows of -inf and +inf,
# tails (37, 101), several reduced dims, 16-bit floats, max(dim)'s values and indices together.
ARG_CASES = {
    "argmax": lambda x: x.argmax(-1),
    "argmin": lambda x: x.argmin(-1),
    "max_dim": lambda x: torch.max(x * 2, -1),
    "min_dim": lambda x: torch.min(x, 1),
    "argmax_all": lambda x: x.argmax(),
    "argmax_keepdim": lambda x: x.argmax(1, keepdim=True) + x.argmin(-1, keepdim=True),
}


@pytest.mark.parametrize("name", list(ARG_CASES))
@pytest.mark.parametrize("values", ["random", "ties", "nan", "inf"])
@pytest.mark.parametrize("dtype", [F32, torch.bfloat16])
def test_arg_reductions_in_vector_form(name, values, dtype, vectorize, debug):
    x = make_tensor((6, 101), dtype=F32)
    if values == "ties":
        x = (x * 2).round()
    elif values == "nan":
        x[1, 7] = x[1, 50] = x[3, 100] = x[5, 0] = float("nan")
    elif values == "inf":
        x[0] = float("-inf")
        x[2] = float("inf")
        x[4, ::3] = float("inf")
        x[5, 1::3] = float("-inf")
    check(ARG_CASES[name], x.to(dtype))
    text = kernel_text(debug)
    assert "coil_varg_step<" in text, text


def test_arg_reduction_over_several_dims_in_vector_form(vectorize, debug):
    x = (make_tensor((3, 5, 37)) * 3).round()
    check(lambda t: t.view(3, -1).argmax(-1) + t.amax((1, 2)).long(), x)
    check(lambda t: t.argmax(), x)
    assert "coil_varg_step<" in kernel_text(debug)


def test_arg_reduction_of_float64_stays_scalar_and_says_why(vectorize, debug):
    check(lambda t: t.argmax(-1), make_tensor((4, 37), dtype=F64))
    assert "argmax reduction over float64 lanes" in kernel_text(debug)


# Column loops (a reduction over a dim that is not innermost) compute what an x point's later
# loops derive from its earlier results once per block of columns (log(sum), rsqrt(var + eps)),
# and keep values their later loops compute again in the output (softmax's exponential); 129
# columns leave a masked vector tail in every block.
@pytest.mark.parametrize("dtype", [F32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["log_softmax", "softmax", "norm"])
def test_column_reductions_with_later_loops(op, dtype, debug):
    f = {
        "log_softmax": lambda t: torch.log_softmax(t * 1.5 - 0.25, 1),
        "softmax": lambda t: torch.softmax(t, 1),
        "norm": lambda t: (t - t.mean(1, keepdim=True)) * torch.rsqrt(t.var(1, keepdim=True) + 1e-5),
    }[op]
    x = torch.randn(7, 37, 129, dtype=dtype) * 3
    out = torch.compile(f, backend="coil")(x)
    # (float16 var: eager's own algorithm rounds differently in the last place, in row form too)
    tol = {"atol": 2e-3, "rtol": 2e-3} if dtype == torch.float16 and op == "norm" else {}
    torch.testing.assert_close(out, f(x), **tol)
    text = kernel_text(debug)
    assert "reduction strategy: column" in text


# A transposed read of 16-bit values goes through a float tile (widened as it is transposed):
# the same bits as eager's.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,perm", [((64, 16, 200), (2, 1, 0)), ((509, 257), (1, 0))])
def test_transposed_16_bit_reads(shape, perm, dtype, debug):
    x = torch.randn(*shape, dtype=dtype)
    y = torch.randn(*[shape[p] for p in perm], dtype=dtype)
    f = lambda a, b: a.permute(*perm) * 2 + b
    out = torch.compile(f, backend="coil")(x, y)
    assert torch.equal(out, f(x, y))
    assert "coil_transpose_tile_widen" in kernel_text(debug)


# A bf16 sum of everything: its loop is split across threads, the cast after it runs once.
def test_full_16_bit_sum_splits_across_threads(debug):
    x = torch.randn(512, 1031, dtype=torch.bfloat16)
    f = lambda t: (t * 2).sum()
    out = torch.compile(f, backend="coil")(x)
    torch.testing.assert_close(out, f(x))
    assert "#pragma omp parallel for reduction(+:" in kernel_text(debug)


# Rows gathered by an index (embedding, x[idx] along a leading dim): each row's index is checked
# once before the loop over the row, and 16-bit elements are copied bit for bit (NaN payloads
# too), as eager copies them.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, F32])
def test_gathered_rows_copy_bits(dtype, debug):
    w = torch.randn(100, 203).to(dtype)
    w.view(torch.int16 if dtype != F32 else torch.int32)[3, :7] = 0x7FC5 if dtype != F32 else 0x7FC00005
    idx = torch.randint(0, 100, (37,))
    idx[:4] = 3
    f = lambda w, i: (F.embedding(i, w), w[i])
    out = torch.compile(f, backend="coil")(w, idx)
    bits = torch.int16 if dtype != F32 else torch.int32
    for o, r in zip(out, f(w, idx)):
        assert torch.equal(o.view(bits), r.view(bits))
    text = kernel_text(debug)
    if dtype != F32:
        assert "coil_vcopy_half(" in text


# Float floor division in vector form (coil_vfloordiv): ATen's formula on every lane, so the same
# bits as eager's, signed zeros, infinities, NaNs and division by zero included.
@pytest.mark.parametrize("dtype", [F32, F64])
def test_floor_divide_in_vector_form(dtype, debug):
    a = torch.randn(37, 129, dtype=dtype) * 10
    b = torch.randn(37, 129, dtype=dtype) * 3
    a[0, :12] = torch.tensor([0.0, -0.0, 6.0, -6.0, float("inf"), float("nan"), 7.0, -7.0, -0.0,
                              1e-30, -5.0, 3.0])
    b[0, :12] = torch.tensor([3.0, 3.0, -3.0, 3.0, 2.0, 1.0, 0.0, 0.0, -2.0, 1e30, 5.0,
                              float("inf")])
    f = lambda a, b: torch.floor_divide(a, b)
    out = torch.compile(f, backend="coil")(a, b)
    ref = f(a, b)
    bits = torch.int32 if dtype == F32 else torch.int64
    same = (out.view(bits) == ref.view(bits)) | (out.isnan() & ref.isnan())
    assert bool(same.all()), (out[~same], ref[~same])
    assert "coil_vfloordiv(" in kernel_text(debug)
