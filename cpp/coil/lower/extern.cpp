// Ops coil deliberately leaves to libraries: matrix products and convolutions run as extern calls
// through torch (BLAS/oneDNN on CPU, cuBLAS/cuDNN on GPU). Their inputs are realized; outputs are
// buffers with the layout the library produces. GPU graphs with bf16/fp16 convolutions run them
// channels-last (see Lowering::channels_last). Matrix products on CUDA get padded leading
// dimensions where theirs are not 16-byte multiples (LowerOptions::gemm_padding).
#include "coil/lower/lowering.h"

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

// A 2-D convolution in a channels-last graph: its input and weight are laid out NHWC (a copy
// kernel where they are not: the weights' copy is small next to the activations), and cuDNN
// returns NHWC, which later kernels read as such.
std::vector<TensorBox> lower_convolution(Lowering& L, const graph::Node& n) {
  const graph::TensorMeta& m = L.meta(n);
  if (!L.channels_last() || m.sizes.size() != 4 || m.device.rfind("cuda", 0) != 0)
    return L.add_extern(n, /*is_fallback=*/false);
  for (size_t i : {0, 1}) {
    const graph::Arg& a = n.args.at(i);
    const TensorBox& b = L.box(a);
    if (b.sizes.size() != 4 || is_channels_last(L.as_ref(b))) continue;
    std::vector<Expr> strides = channels_last_strides(b.sizes);
    L.replace_value(a, L.realize(b, &strides));
  }
  std::vector<Expr> out = channels_last_strides(m.sizes);
  return L.add_extern(n, /*is_fallback=*/false, &out);
}

bool wants_gemm_padding(const Lowering& L, const graph::TensorMeta& m) {
  using P = LowerOptions::Padding;
  P p = L.options().gemm_padding;
  if (p == P::Off || !graph::is_floating(m.dtype)) return false;
  return p == P::On || m.device.rfind("cuda", 0) == 0;
}

// Strides of a matrix (or batch of matrices) with its leading dimension padded: 16 bytes, or 128
// from 1024 elements on (Inductor's threshold for padding a stride).
std::vector<Expr> gemm_strides(const std::vector<Expr>& sizes, const std::vector<Expr>& dense,
                               DType dtype) {
  int64_t item = graph::dtype_itemsize(dtype);
  return ir::Layout::padded_strides(sizes, dense, std::max<int64_t>(1, 16 / item),
                                    std::max<int64_t>(1, 128 / item), 1024);
}

// mm(a, b), addmm(bias, a, b), bmm(a, b), baddbmm(c, a, b). cuBLAS runs its vectorized kernels
// only when every matrix's leading dimension is a multiple of 16 bytes; one odd dimension (GPT-2's
// 50257-word vocabulary) drops the whole product to a kernel several times slower. So where
// padding is on, an operand coil computes is stored with padded rows, and a result whose rows
// are not aligned is written by the library into a padded buffer (the out= overload). Operands
// already in memory are passed as they are: a copy would cost what the aligned kernel saves.
std::vector<TensorBox> lower_matmul(Lowering& L, const graph::Node& n) {
  const graph::TensorMeta& m = L.meta(n);
  if (!wants_gemm_padding(L, m)) return L.add_extern(n, /*is_fallback=*/false);
  bool with_input = n.target == "aten.addmm.default" || n.target == "aten.baddbmm.default";
  for (size_t i : {with_input ? 1u : 0u, with_input ? 2u : 1u}) {
    const graph::Arg& a = n.args.at(i);
    if (!L.is_tensor(a)) continue;
    const TensorBox& b = L.box(a);
    if (b.rank() < 2 || as_strided_view(b)) continue;
    const graph::Node& src = L.graph().node(a.node);
    std::vector<Expr> dense = ir::Layout::contiguous_strides(b.sizes);
    if (src.meta.size() == 1 && src.meta[0].strides.size() == b.rank())
      dense = ir::Layout::dense_strides_like(b.sizes, src.meta[0].strides);
    std::vector<Expr> padded = gemm_strides(b.sizes, dense, b.dtype);
    if (padded != dense) L.replace_value(a, L.realize(b, &padded));
  }
  std::vector<Expr> dense = ir::Layout::contiguous_strides(m.sizes);
  std::vector<Expr> padded = gemm_strides(m.sizes, dense, m.dtype);
  if (padded == dense) return L.add_extern(n, /*is_fallback=*/false);
  return L.add_extern(n, /*is_fallback=*/false, &padded, /*out_variant=*/true);
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
