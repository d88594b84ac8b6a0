// Ops coil deliberately leaves to libraries: matrix products and convolutions run as extern calls
// through torch (BLAS/oneDNN on CPU, cuBLAS/cuDNN on GPU). Their inputs are realized; outputs are
// buffers with the layout the library produces.
#include "coil/lower/lowering.h"

namespace coil::lower {

void register_externs(Registry& r) {
  for (const char* name : {"aten.mm.default", "aten.addmm.default", "aten.bmm.default",
                           "aten.baddbmm.default", "aten.convolution.default"}) {
    r[name] = [](Lowering& L, const graph::Node& n) {
      return L.add_extern(n, /*is_fallback=*/false);
    };
  }
}

}  // namespace coil::lower
