// Ops coil deliberately leaves to libraries: matrix products and convolutions run as extern calls
// through torch (BLAS/oneDNN on CPU, cuBLAS/cuDNN on GPU). Their inputs are realized; outputs are
// buffers with the layout the library produces. GPU graphs with bf16/fp16 convolutions run them
// channels-last (see Lowering::channels_last). Matrix products on CUDA get padded leading
// dimensions where theirs are not 16-byte multiples (LowerOptions::gemm_padding).
#include <algorithm>
#include <numeric>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

namespace {

bool is_channels_last(const ir::TensorRef& t) {
  const std::vector<Expr>& s = t.sizes;
  std::vector<Expr> want = channels_last_strides(s);
  for (size_t i = 0; i < 4; ++i) {
    if (s[i] != Expr(1) && t.strides[i] != want[i]) return false;
  }
  return true;
}

// Whether a convolution's bias is added by a kernel of coil's instead of the library's. cuDNN
// convolutions do not add a bias themselves: ATen adds it after the call with an `add_` kernel of
// its own (the same rounding as adding it later: the result is stored in its dtype first). Peeled
// off, the add fuses into whatever reads the result (Inductor does the same on GPUs). On the CPU
// oneDNN adds the bias inside the convolution, which stays.
bool peels_bias(const Lowering& L, const graph::Node& n, const graph::TensorMeta& m) {
  if (n.args.size() < 3 || n.args[2].kind != graph::Arg::Kind::Node) return false;
  if (m.sizes.size() < 3 || L.box(n.args[2]).rank() != 1) return false;
  return m.device.rfind("cuda", 0) == 0 || L.options().triton;
}

// out + bias, bias along dim 1, in the result's dtype as ATen's add_ computes it.
TensorBox add_bias(const TensorBox& out, const TensorBox& bias, const std::string& origin) {
  std::vector<Expr> idx = ir::index_vars(out.rank());
  DType math = opmath(out.dtype);
  Value sum =
      ir::binary(ir::Op::Add, ir::cast(out.load(idx), math), ir::cast(bias.load({idx[1]}), math));
  TensorBox r = out;
  r.body = ir::cast(sum, out.dtype);
  r.origins.insert(bias.origins.begin(), bias.origins.end());
  r.origins.insert(origin);
  return r;
}

// A 2-D convolution in a channels-last graph: its input and weight are laid out NHWC (a copy
// kernel where they are not: the weights' copy is small next to the activations), and cuDNN
// returns NHWC, which later kernels read as such.
std::vector<TensorBox> lower_convolution_call(Lowering& L, const graph::Node& n) {
  const graph::TensorMeta& m = L.meta(n);
  if (!L.channels_last() || m.sizes.size() != 4) return L.add_extern(n, /*is_fallback=*/false);
  // The layout decision overrides eager's: inputs in memory NCHW are copied, computed ones stored
  // NHWC (to_extern_arg would store them in eager's layout).
  for (size_t i : {0, 1}) {
    const graph::Arg& a = n.args.at(i);
    const TensorBox& b = L.box(a);
    if (b.sizes.size() != 4) continue;
    std::optional<ir::TensorRef> ref = as_strided_view(b);
    if (ref && is_channels_last(*ref)) continue;
    std::vector<Expr> strides = channels_last_strides(b.sizes);
    L.replace_value(a, L.realize(b, &strides));
  }
  std::vector<Expr> out = channels_last_strides(m.sizes);
  return L.add_extern(n, /*is_fallback=*/false, &out);
}

// aten.convolution: the library call, with its bias peeled off where that pays (peels_bias).
std::vector<TensorBox> lower_convolution(Lowering& L, const graph::Node& n) {
  const graph::TensorMeta& m = L.meta(n);
  if (!peels_bias(L, n, m)) return lower_convolution_call(L, n);
  graph::Node plain = n;
  plain.args[2] = graph::Arg::none();
  std::vector<TensorBox> out = lower_convolution_call(L, plain);
  L.note_extern_decision("bias added by the kernel that reads the result");
  out[0] = add_bias(out[0], L.box(n.args[2]), n.name);
  return out;
}

bool wants_gemm_padding(const Lowering& L, const graph::TensorMeta& m) {
  using P = LowerOptions::Padding;
  P p = L.options().gemm_padding;
  if (p == P::Off || !graph::is_floating(m.dtype)) return false;
  return p == P::On || m.device.rfind("cuda", 0) == 0;
}

// Elements in 16 bytes: the alignment cuBLAS's vectorized kernels need of leading dimensions and
// of the M, N, K sizes themselves (its heuristics pick align1 kernels for an odd N).
int64_t gemm_alignment(DType dtype) {
  return std::max<int64_t>(1, 16 / graph::dtype_itemsize(dtype));
}

// Products smaller than this many multiply-adds keep odd sizes: the kernel that zero-extends an
// operand would cost more than the aligned GEMM saves.
constexpr int64_t kMinPaddedGemmWork = int64_t{1} << 27;

// Strides of a matrix (or batch of matrices) with its leading dimension padded: 16 bytes, or 128
// from 1024 elements on (Inductor's threshold for padding a stride).
std::vector<Expr> gemm_strides(const std::vector<Expr>& sizes, const std::vector<Expr>& dense,
                               DType dtype) {
  int64_t item = graph::dtype_itemsize(dtype);
  return ir::Layout::padded_strides(sizes, dense, gemm_alignment(dtype),
                                    std::max<int64_t>(1, 128 / item), 1024);
}

// x read as a tensor of `sizes` (each at least x's): the added rows and columns are zero.
TensorBox zero_extend(const TensorBox& x, const std::vector<Expr>& sizes) {
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Value inside = ir::int_constant(1, DType::Bool);
  for (size_t d = 0; d < x.rank(); ++d) {
    if (sizes[d] == x.sizes[d]) continue;
    Value lt = ir::binary(ir::Op::Lt, ir::index_expr(idx[d], DType::Int64),
                          ir::index_expr(x.sizes[d], DType::Int64));
    inside = ir::binary(ir::Op::LogicalAnd, inside, lt);
  }
  TensorBox out = x;
  out.sizes = sizes;
  out.body = ir::where(inside, mask_loads(x.load(idx), inside), ir::int_constant(0, x.dtype));
  return out;
}

// Whether node `id`'s value is a graph output, directly or through views (a worklist: no
// recursion as deep as a chain of views).
bool reaches_an_output(const graph::Graph& g, int id) {
  std::vector<int> work = {id};
  while (!work.empty()) {
    int at = work.back();
    work.pop_back();
    for (int u : g.users(at)) {
      const graph::Node& n = g.node(u);
      if (n.kind == graph::NodeKind::Output) return true;
      if (n.target == "aten.view.default" || n.target == "aten._unsafe_view.default" ||
          n.target == "aten.reshape.default")
        work.push_back(u);
    }
  }
  return false;
}

Expr round_up(const Expr& e, int64_t m) {
  return (*e.as_int() + m - 1) / m * m;
}

// The operand to pass for a matrix argument: zero-extended to `sizes` where those are larger,
// stored (when coil computes it) in eager's orientation with its leading dimension padded. The
// stored operand becomes the node's value: later readers load it rather than compute it again,
// and a transposed or reshaped view of it (a backward's t(grad) for the weight's gradient, a
// layer norm's [1, S, D] output viewed [S, D]) is passed as a view instead of being stored a
// second time.
TensorBox gemm_operand(Lowering& L, const graph::Arg& a, const std::vector<Expr>& sizes) {
  const TensorBox& b = L.box(a);
  const graph::Node& src = L.graph().node(a.node);
  bool extend = sizes != b.sizes;
  if (!extend && as_strided_view(b)) return b;  // in memory: passed as it is
  std::vector<Expr> dense = ir::Layout::contiguous_strides(sizes);
  if (src.meta.size() == 1 && src.meta[0].strides.size() == b.rank())
    dense = ir::Layout::dense_strides_like(sizes, src.meta[0].strides);
  std::vector<Expr> padded = gemm_strides(sizes, dense, b.dtype);
  if (extend) return L.realize(zero_extend(b, sizes), &padded);
  if (std::optional<TensorBox> view = L.store_under_view(a, padded)) return *view;
  bool created = false;
  TensorBox stored = L.realize_shared(b, &padded, /*fixed=*/false, &created);
  if (created) L.replace_value(a, stored);  // the same tensor (see Lowering::realize_shared)
  return stored;
}

// mm(a, b), addmm(bias, a, b), bmm(a, b), baddbmm(c, a, b). cuBLAS runs its vectorized kernels
// only when the sizes and leading dimensions are multiples of 16 bytes; one odd size (GPT-2's
// 50257-word vocabulary) drops the product to an align1 kernel several times slower. Where padding
// is on and the product is large, an odd K or N is rounded up: the operands are zero-extended
// (by the kernel that computes them, or a copy for one in memory: a weight), the library computes
// the larger product, and the result is the view of its first N columns, rows padded. An operand
// coil computes is stored with padded rows either way.
std::vector<TensorBox> lower_matmul(Lowering& L, const graph::Node& n) {
  const graph::TensorMeta& m = L.meta(n);
  if (!wants_gemm_padding(L, m)) return L.add_extern(n, /*is_fallback=*/false);
  bool with_input = n.target == "aten.addmm.default" || n.target == "aten.baddbmm.default";
  size_t ia = with_input ? 1 : 0, ib = ia + 1;
  const TensorBox& a = L.box(n.args.at(ia));
  const TensorBox& b = L.box(n.args.at(ib));
  size_t r = a.rank();
  Expr M = a.sizes[r - 2], K = a.sizes[r - 1], N = b.sizes[r - 1];
  int64_t align = gemm_alignment(m.dtype);
  bool known = M.as_int() && K.as_int() && N.as_int();
  Expr work = M * K * N;
  for (size_t d = 0; d + 2 < r; ++d) work = work * a.sizes[d];
  bool odd = known && (*K.as_int() % align != 0 || *N.as_int() % align != 0);
  // A non-vector bias that broadcasts over the columns cannot be zero-extended cheaply: plain.
  const TensorBox* bias = with_input ? &L.box(n.args.at(0)) : nullptr;
  bool bias_ok = !bias || bias->rank() == 0 || bias->sizes.back() == Expr(1) ||
                 (bias->rank() == 1 && n.target == "aten.addmm.default");
  if (!odd || !work.as_int() || *work.as_int() < kMinPaddedGemmWork || !bias_ok) {
    std::map<size_t, TensorBox> args = {{ia, gemm_operand(L, n.args.at(ia), a.sizes)},
                                        {ib, gemm_operand(L, n.args.at(ib), b.sizes)}};
    return L.add_extern(n, /*is_fallback=*/false, nullptr, &args);
  }
  Expr Kp = round_up(K, align), Np = round_up(N, align);
  std::vector<Expr> sa = a.sizes, sb = b.sizes;
  sa[r - 1] = Kp;
  sb[r - 2] = Kp;
  // A product that is a graph output (through views) must come out with eager's strides: the
  // padded result and the output would both be live while one is copied into the other (GPT-2's
  // logits: 785 MB at the peak where Inductor, returning the padded view, holds 472; BERT's MLM
  // logits, returned and read by the loss: 1.00 GB against Inductor's 0.56). Its other readers
  // (a loss) read the output as well as they would the padded rows. cuBLAS's
  // aligned kernels need the product's N aligned, not only its leading dimension: written
  // through a padded stride it ran align1 (3.9 ms, H200 2026-12-02). So the output is written in
  // groups of rows instead (coil::mm_row_groups): the rows that start equally far from a 16-byte
  // boundary, align / gcd(N, align) apart, form a matrix with an aligned leading dimension whose
  // aligned middle columns are one aligned product, straight into the output; the few columns
  // at the ends of the rows are two small products. b is read in place (a weight is not copied:
  // 77 MB for GPT-2's), and nothing is copied afterwards (row blocks copied out of a scratch
  // product took 0.84 ms of GPT-2's head where the aligned product alone takes 0.46).
  int64_t groups = align / std::gcd(*N.as_int(), align);
  if (r == 2 && *N.as_int() > 2 * align && *M.as_int() >= groups &&
      reaches_an_output(L.graph(), n.id)) {
    graph::Node grouped = n;
    grouped.target = "coil.mm_row_groups.default";
    grouped.args = {n.args.at(ia), n.args.at(ib), with_input ? n.args.at(0) : graph::Arg::none(),
                    graph::Arg::integer(align)};
    grouped.kwargs.clear();
    grouped.c_args.clear();  // (an op implemented in Python: no C++ wrapper calls it)
    std::map<size_t, TensorBox> grouped_args = {{0, gemm_operand(L, n.args.at(ia), sa)},
                                                {1, gemm_operand(L, n.args.at(ib), sb)}};
    std::vector<TensorBox> out =
        L.add_extern(grouped, /*is_fallback=*/false, nullptr, &grouped_args);
    L.note_extern_decision((K == Kp ? "" : "padded K " + K.str() + "->" + Kp.str() + ", ") + "N " +
                           N.str() + " written in place (a graph output): " +
                           std::to_string(groups) + " groups of rows " + std::to_string(groups) +
                           " apart, each one aligned product for cuBLAS's aligned kernels, and "
                           "the end columns");
    return out;
  }
  sb[r - 1] = Np;
  std::map<size_t, TensorBox> args = {{ia, gemm_operand(L, n.args.at(ia), sa)},
                                      {ib, gemm_operand(L, n.args.at(ib), sb)}};
  if (bias && bias->rank() == 1 && bias->sizes[0] != Expr(1)) {
    args[0] = L.realize(zero_extend(*bias, {Np}));
  }
  graph::Node wide = n;  // the larger product: [.., M, Np], contiguous
  wide.meta[0].sizes.back() = Np;
  wide.meta[0].strides = ir::Layout::contiguous_strides(wide.meta[0].sizes);
  std::vector<TensorBox> out = L.add_extern(wide, /*is_fallback=*/false, nullptr, &args);
  L.note_extern_decision("padded K " + K.str() + "->" + Kp.str() + ", N " + N.str() + "->" +
                         Np.str() + " for cuBLAS's aligned kernels");
  out[0].sizes = m.sizes;  // the first N columns of the padded result
  return out;
}

}  // namespace

void register_externs(Registry& r) {
  for (const char* name :
       {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default"}) {
    r[name] = lower_matmul;
  }
  r["aten.convolution.default"] = lower_convolution;
}

}  // namespace coil::lower
