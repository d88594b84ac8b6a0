// Ops coil deliberately leaves to libraries: matrix products and convolutions run as extern calls
// through torch (BLAS/oneDNN on CPU, cuBLAS/cuDNN on GPU). Their inputs are realized; outputs are
// buffers with the layout the library produces. GPU graphs with bf16/fp16 convolutions run them
// channels-last (see Lowering::channels_last).
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

}  // namespace

void register_externs(Registry& r) {
  for (const char* name :
       {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default"}) {
    r[name] = [](Lowering& L, const graph::Node& n) {
      return L.add_extern(n, /*is_fallback=*/false);
    };
  }
  r["aten.convolution.default"] = lower_convolution;
}

}  // namespace coil::lower
