#include "coil/lower/lowering.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "coil/ir/realize_policy.h"

namespace coil::lower {

Expr TensorBox::numel() const {
  Expr n = 1;
  for (const Expr& s : sizes) n = n * s;
  return n;
}

Value TensorBox::load(const std::vector<Expr>& idx) const {
  if (idx.size() != sizes.size()) {
    throw std::logic_error("TensorBox::load: rank " + std::to_string(sizes.size()) + " but " +
                           std::to_string(idx.size()) + " indices");
  }
  sym::ExprMap repl;
  for (size_t i = 0; i < idx.size(); ++i) {
    Expr v = ir::index_var(static_cast<int>(i));
    if (idx[i] != v) repl[v] = idx[i];
  }
  // Variables beyond the rank must not leak in from the caller's index: the body only mentions
  // v0..v{rank-1}, and the caller's idx may itself mention any variables.
  if (repl.empty()) return body;
  return ir::substitute_indices(body, repl);
}

namespace {

// Whether e is nonnegative at the size hints (true where some symbol has none: a graph's symbols
// always do; hand-built test graphs may not).
bool hint_nonnegative(const Expr& e) {
  try {
    return sym::size_hint(e, sym::RangeEnv{}) >= 0;
  } catch (const std::exception&) {
    return true;
  }
}

}  // namespace

std::optional<ir::TensorRef> as_strided_view(const TensorBox& box) {
  if (!box.body || box.body.op() != ir::Op::Load || !box.body->args.empty()) return std::nullopt;
  if (box.body.dtype() != box.dtype) return std::nullopt;
  auto affine = sym::as_affine(box.body->index, ir::index_vars(box.rank()));
  if (!affine) return std::nullopt;
  ir::TensorRef ref;
  ref.buffer = box.body->buffer;
  ref.dtype = box.dtype;
  ref.sizes = box.sizes;
  ref.strides = affine->coeffs;
  ref.offset = affine->constant;
  // A negative stride (flip) is no tensor torch can make: such a box is no view (found by the
  // fuzzer, seed 8140: mm of a flipped input read memory before the tensor). With symbolic
  // sizes the stride must be shown nonnegative for every size in range: -s1 is a flip too
  // (seed 1531 under --dynamic: a convolution of a flipped input read garbage).
  // (A size-1 dim's stride is never used: 0 will do.)
  for (size_t i = 0; i < ref.strides.size(); ++i) {
    const Expr& st = ref.strides[i];
    auto c = st.as_int();
    // Interval arithmetic cannot show every layout stride nonnegative (a conv output's
    // FloorDivs); a flip's stride is minus a layout stride, negative at the size hints too.
    sym::Range r = c ? sym::Range{*c, *c} : sym::bounds(st, sym::RangeEnv{});
    bool nonnegative = r.lo >= 0 || (r.hi >= 0 && hint_nonnegative(st));
    if (nonnegative) continue;
    if (ref.sizes[i] != Expr(1)) return std::nullopt;
    ref.strides[i] = 0;
  }
  return ref;
}

namespace {

// Whether the graph keeps its 4-D tensors channels-last, and why (LowerOptions::channels_last).
// cuDNN runs 16-bit 2-D convolutions as NHWC kernels: fed NCHW tensors it transposes each input
// and result itself (about 1 ms a call of ResNet-50's 6.9 ms at batch 64 on the H200), and its
// NCHW 1x1 convolutions fall back to align2 GEMMs. Training graphs stay NCHW for now: the
// backward's ATen convolution_backward gets eager's layouts, so NHWC activations would be copied.
std::pair<bool, std::string> decide_layout(const graph::Graph& g, const LowerOptions& o) {
  using L = LowerOptions::Layout;
  const graph::TensorMeta* conv = nullptr;
  bool backward = false;
  for (const graph::Node& n : g.nodes()) {
    backward |= n.target == "aten.convolution_backward.default";
    if (n.target == "aten.convolution.default" && n.meta.size() == 1 &&
        n.meta[0].sizes.size() == 4 && !conv)
      conv = &n.meta[0];
  }
  if (!conv || o.channels_last == L::Contiguous) return {false, ""};
  if (o.channels_last == L::ChannelsLast)
    return {true, "channels-last (NHWC) 4-D tensors: forced (channels_last=on)"};
  bool reduced = conv->dtype == DType::BFloat16 || conv->dtype == DType::Float16;
  if (conv->device.rfind("cuda", 0) != 0 || !reduced)
    return {false, "contiguous (NCHW) 4-D tensors: 2-D convolutions, but not 16-bit on CUDA"};
  if (!o.inference || backward)
    return {false,
            "contiguous (NCHW) 4-D tensors: a training graph (convolution_backward runs "
            "in ATen with eager's layouts)"};
  return {true,
          "channels-last (NHWC) 4-D tensors: 16-bit 2-D convolutions on CUDA (cuDNN's "
          "kernels are NHWC)"};
}

}  // namespace

Lowering::Lowering(const graph::Graph& g, ir::Program& prog, LowerOptions options)
    : g_(g), prog_(prog), options_(options) {
  values_.resize(g.nodes().size());
  auto [nhwc, why] = decide_layout(g, options_);
  channels_last_ = nhwc;
  prog_.layout_decision = why;
}

bool same_strides(const std::vector<Expr>& sizes, const std::vector<Expr>& a,
                  const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || sizes[i] == Expr(1)) continue;
    // A dim of at most one element (a size symbol in [0, 1]) never steps: its stride is free.
    if (!sym::statically_known_true(sym::le(sizes[i], 1), sym::RangeEnv{})) return false;
  }
  return true;
}

std::vector<Expr> channels_last_strides(const std::vector<Expr>& s) {
  // [N, C, H, W] stored as N, H, W, C.
  return {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

bool Lowering::is_tensor(const graph::Arg& a) const {
  return a.kind == graph::Arg::Kind::Node && !values_.at(a.node).empty();
}

const std::string* Lowering::host_scalar(int id) const {
  auto it = host_scalars_.find(id);
  return it == host_scalars_.end() ? nullptr : &it->second;
}

const TensorBox& Lowering::box(const graph::Arg& a) const {
  if (a.kind != graph::Arg::Kind::Node) throw std::logic_error("expected a tensor argument");
  if (host_scalar(a.node)) {
    throw std::logic_error("argument %" + g_.node(a.node).name +
                           " is a Python number computed at run time, not a tensor");
  }
  const auto& boxes = values_.at(a.node);
  if (boxes.size() != 1) {
    throw std::logic_error("argument %" + g_.node(a.node).name + " is not a single tensor");
  }
  return boxes[0];
}

const graph::Arg* Lowering::arg(const graph::Node& n, size_t i, const std::string& name) const {
  if (i < n.args.size()) return &n.args[i];
  return n.kwarg(name);
}

Operand Lowering::operand(const graph::Arg& a) const {
  switch (a.kind) {
    case graph::Arg::Kind::Node: {
      const TensorBox& b = box(a);
      return {b.rank() == 0 ? Operand::Kind::ZeroDimTensor : Operand::Kind::Tensor, b.dtype};
    }
    case graph::Arg::Kind::Bool:
      return {Operand::Kind::Scalar, DType::Bool};
    case graph::Arg::Kind::Int:
    case graph::Arg::Kind::Sym:  // a dynamic size used as a number: a Python int
      return {Operand::Kind::Scalar, DType::Int64};
    case graph::Arg::Kind::Float:
      return {Operand::Kind::Scalar, DType::Float64};
    default:
      throw std::logic_error("operand: argument is neither a tensor nor a number");
  }
}

Value Lowering::scalar(const graph::Arg& a, DType d) const {
  switch (a.kind) {
    case graph::Arg::Kind::Bool:
      return ir::int_constant(a.b ? 1 : 0, d);
    case graph::Arg::Kind::Int:
      return graph::is_floating(d) ? ir::constant(static_cast<double>(a.i), d)
                                   : ir::int_constant(a.i, d);
    case graph::Arg::Kind::Float:
      // A float number in an integer computation (masked_fill of an int tensor with 2.5) is
      // converted the way eager converts it: truncated toward zero.
      if (!graph::is_floating(d)) return ir::cast(ir::constant(a.f, DType::Float64), d);
      return ir::constant(a.f, d);
    case graph::Arg::Kind::Sym: {
      // A dynamic size used as a number (x * s0): the kernel reads the size argument.
      if (auto v = a.sym.as_int()) return scalar(graph::Arg::integer(*v), d);
      Value i = ir::index_expr(a.sym, DType::Int64);
      return d == DType::Int64 ? i : ir::cast(i, d);
    }
    default:
      throw std::logic_error("scalar: argument is not a number");
  }
}

double static_number(const graph::Arg& a, const char* what) {
  switch (a.kind) {
    case graph::Arg::Kind::Float:
      return a.f;
    case graph::Arg::Kind::Int:
      return static_cast<double>(a.i);
    case graph::Arg::Kind::Bool:
      return a.b ? 1.0 : 0.0;
    case graph::Arg::Kind::Sym:
      return static_cast<double>(static_value(a.sym, what));
    default:
      throw std::logic_error(std::string(what) + " is not a number");
  }
}

int64_t static_value(const Expr& e, const char* what) {
  if (auto v = e.as_int()) return *v;
  throw NeedsStaticValue(std::string(what) + " is symbolic (" + e.str() + ")");
}

Expr Lowering::int_arg(const graph::Arg& a) const {
  if (a.kind == graph::Arg::Kind::Int) return Expr(a.i);
  if (a.kind == graph::Arg::Kind::Sym) return a.sym;
  if (a.kind == graph::Arg::Kind::Bool) return Expr(a.b ? 1 : 0);
  throw std::logic_error("expected an integer argument");
}

std::vector<Expr> Lowering::int_list(const graph::Arg& a) const {
  if (a.kind != graph::Arg::Kind::List) return {int_arg(a)};
  std::vector<Expr> out;
  for (const auto& item : a.list) out.push_back(int_arg(item));
  return out;
}

const graph::TensorMeta& Lowering::meta(const graph::Node& n, size_t i) const {
  if (i >= n.meta.size()) {
    throw std::logic_error("node %" + n.name + " has no tensor metadata for output " +
                           std::to_string(i));
  }
  return n.meta[i];
}

std::string Lowering::new_buffer_name() {
  return "buf" + std::to_string(next_buffer_++);
}

TensorBox Lowering::read_buffer(const std::string& name, const ir::Layout& layout) const {
  TensorBox b;
  b.dtype = layout.dtype;
  b.device = layout.device;
  b.sizes = layout.sizes;
  b.body = ir::load(name, layout.dtype, layout.index(ir::index_vars(layout.sizes.size())));
  return b;
}

TensorBox Lowering::realize(const TensorBox& box, const std::vector<Expr>* strides, bool fixed) {
  ir::Buffer buf;
  buf.name = new_buffer_name();
  buf.kind = ir::Buffer::Kind::Computed;
  buf.layout.dtype = box.dtype;
  buf.layout.device = box.device;
  buf.layout.sizes = box.sizes;
  buf.layout.strides = strides ? *strides : default_strides(box.sizes);
  buf.layout.offset = 0;
  buf.layout.fixed = fixed;
  buf.ranges = box.sizes;
  buf.body = box.body;
  // The box's own origins: realizing an extern call's input does not make the call an origin.
  buf.origins = box.origins;
  prog_.buffers.push_back(buf);
  return read_buffer(buf.name, buf.layout);
}

TensorBox Lowering::realize_shared(const TensorBox& box, const std::vector<Expr>* strides,
                                   bool fixed, bool* created) {
  if (created) *created = false;
  // Bodies, sizes and strides are interned, so "the same" is a pointer comparison.
  std::vector<Expr> st = strides ? *strides : default_strides(box.sizes);
  std::vector<const void*> key = {box.body.get(),
                                  reinterpret_cast<const void*>(static_cast<uintptr_t>(box.dtype)),
                                  reinterpret_cast<const void*>(static_cast<uintptr_t>(fixed))};
  for (const Expr& e : box.sizes) key.push_back(e.node());
  key.push_back(nullptr);
  for (const Expr& e : st) key.push_back(e.node());
  auto found = realized_.find(key);
  if (found != realized_.end() && prog_.buffer(found->second).layout.device == box.device) {
    ir::Buffer& existing = prog_.buffer(found->second);
    existing.origins.insert(box.origins.begin(), box.origins.end());
    return read_buffer(existing.name, existing.layout);
  }
  TensorBox stored = realize(box, &st, fixed);
  realized_[key] = prog_.buffers.back().name;
  if (created) *created = true;
  return stored;
}

std::vector<Expr> Lowering::default_strides(const std::vector<Expr>& sizes) const {
  if (channels_last_ && sizes.size() == 4) return channels_last_strides(sizes);
  return ir::Layout::contiguous_strides(sizes);
}

namespace {

// A computed buffer contiguous over `ranges` (a reduction's or a scan's, which the caller
// completes), its origins with the node being lowered.
ir::Buffer contiguous_computed(std::string name, DType dtype, const std::string& device,
                               std::vector<Expr> ranges, Value body, std::set<std::string> origins,
                               const graph::Node* current) {
  ir::Buffer buf;
  buf.name = std::move(name);
  buf.kind = ir::Buffer::Kind::Computed;
  buf.layout.dtype = dtype;
  buf.layout.device = device;
  buf.layout.sizes = ranges;
  buf.layout.strides = ir::Layout::contiguous_strides(ranges);
  buf.layout.offset = 0;
  buf.ranges = std::move(ranges);
  buf.body = body;
  buf.origins = std::move(origins);
  if (current) buf.origins.insert(current->name);
  return buf;
}

}  // namespace

TensorBox Lowering::add_reduction(DType out_dtype, const std::string& device,
                                  std::vector<Expr> ranges, std::vector<Expr> reduction_ranges,
                                  ir::ReductionType type, Value body,
                                  std::set<std::string> origins) {
  // The same reduction of the same body (sum for a mean and a sum of one tensor, say) is computed
  // once: interned bodies and sizes make "the same" a pointer comparison.
  std::vector<const void*> key = {body.get(),
                                  reinterpret_cast<const void*>(static_cast<uintptr_t>(type)),
                                  reinterpret_cast<const void*>(static_cast<uintptr_t>(out_dtype))};
  for (const Expr& e : ranges) key.push_back(e.node());
  key.push_back(nullptr);
  for (const Expr& e : reduction_ranges) key.push_back(e.node());
  auto found = reductions_.find(key);
  if (found != reductions_.end() && prog_.buffer(found->second).layout.device == device) {
    ir::Buffer& existing = prog_.buffer(found->second);
    existing.origins.insert(origins.begin(), origins.end());
    if (current_) existing.origins.insert(current_->name);
    return read_buffer(existing.name, existing.layout);
  }
  ir::Buffer buf = contiguous_computed(new_buffer_name(), out_dtype, device, std::move(ranges),
                                       body, std::move(origins), current_);
  buf.reduction_ranges = std::move(reduction_ranges);
  buf.reduction = type;
  prog_.buffers.push_back(buf);
  reductions_[key] = buf.name;
  return read_buffer(buf.name, buf.layout);
}

TensorBox Lowering::add_scan(DType out_dtype, const std::string& device, std::vector<Expr> ranges,
                             int dim, ir::ReductionType type, Value body,
                             std::set<std::string> origins) {
  ir::Buffer buf = contiguous_computed(new_buffer_name(), out_dtype, device, std::move(ranges),
                                       body, std::move(origins), current_);
  buf.scan = type;
  buf.scan_dim = dim;
  prog_.buffers.push_back(buf);
  return read_buffer(buf.name, buf.layout);
}

TensorBox Lowering::add_scatter(const TensorBox& base, std::vector<Expr> ranges,
                                const std::vector<Expr>& position, Value value,
                                ir::ScatterMode mode) {
  // Sums and products into bfloat16/float16 combine in float32, rounded once at the end: added
  // one by one in the 16-bit type, 585 values per element (a scatter_add of 4096 rows into 7)
  // came out 5.5 from the exact sum where eager's was 0.25 off (perf fuzzer, seed 1006).
  DType dtype = base.dtype;
  bool widen = (mode == ir::ScatterMode::Add || mode == ir::ScatterMode::Mul) &&
               (dtype == DType::BFloat16 || dtype == DType::Float16);
  TensorBox start = base;
  if (widen) {
    start.body = ir::cast(base.body, DType::Float32);
    start.dtype = DType::Float32;
  }
  // The copy the scatter starts from is always a buffer of its own (only the scatter reads it),
  // so updating it in place never changes what anything else sees.
  TensorBox copy = realize(start);
  ir::Buffer& c = prog_.buffers.back();
  if (current_) c.origins.insert(current_->name);
  ir::Buffer buf;
  buf.name = new_buffer_name();
  buf.kind = ir::Buffer::Kind::Scatter;
  buf.layout = c.layout;
  buf.ranges = std::move(ranges);
  buf.base = c.name;
  std::vector<Expr> syms;
  for (const Expr& p : position) {
    for (const Expr& s : ir::indirect_symbols(p)) syms.push_back(s);
  }
  buf.target = ir::index_expr(buf.layout.index(position), DType::Int64);
  // Every index is checked, even one whose symbol cancels out of the target.
  Expr missing = 0;
  for (const Expr& s : syms) {
    if (!sym::depends_on(buf.target->index, s)) missing = missing + s;
  }
  buf.body = ir::guard(ir::cast(value, buf.layout.dtype), missing);
  buf.scatter_mode = mode;
  if (current_) buf.origins.insert(current_->name);
  prog_.buffers.push_back(buf);
  TensorBox out = read_buffer(buf.name, buf.layout);
  if (widen) {
    out.body = ir::cast(out.body, dtype);
    out.dtype = dtype;
  }
  return out;
}

void Lowering::apply_realize_policy(TensorBox& box, int num_users) {
  namespace policy = ir::realize_policy;
  if (!box.body || as_strided_view(box)) return;
  if (box.body.op() == ir::Op::Constant) return;
  int ops = ir::count_ops(box.body);
  int reads = static_cast<int>(ir::loaded_buffers(box.body).size());
  bool store = ops > policy::kMaxOpsThreshold || reads > policy::kAccumulatedReadsThreshold ||
               (num_users > 1 && policy::worth_storing_for_reuse(ops, reads));
  // A value several nodes read, computed through a function whose bits depend on its
  // implementation, is computed once for C++ kernels: inlined into two kernels, one loop may use
  // glibc's libmvec, another libm or SLEEF, and `y == y.amax(-1, keepdim=True)` found no
  // maximum in some rows (Triton kernels compute each op one way).
  store |= num_users > 1 && !options_.triton && ir::computes_inexactly(box.body);
  if (store) box = realize(box);
}

namespace {

bool all_outputs_empty(const graph::Node& n) {
  if (n.meta.empty()) return false;
  for (const graph::TensorMeta& m : n.meta) {
    if (m.numel() != Expr(0)) return false;
  }
  return true;
}

std::vector<TensorBox> empty_outputs(const graph::Node& n) {
  std::vector<TensorBox> out;
  for (const graph::TensorMeta& m : n.meta) {
    Value zero =
        graph::is_floating(m.dtype) ? ir::constant(0.0, m.dtype) : ir::int_constant(0, m.dtype);
    out.push_back(TensorBox{m.dtype, m.device, m.sizes, zero, {}});
  }
  return out;
}

}  // namespace

void Lowering::lower_node(const graph::Node& n) {
  current_ = &n;
  prog_.node_targets[n.name] = n.target;
  if (!n.stack_trace.empty()) prog_.stack_traces[n.name] = n.stack_trace;

  if (n.target == "getitem") {
    const graph::Arg& src = n.args.at(0);
    int64_t i = static_value(int_arg(n.args.at(1)), "getitem's index");
    const auto& boxes = values_.at(src.node);
    if (i < 0 || i >= static_cast<int64_t>(boxes.size())) {
      throw std::logic_error("getitem %" + n.name + ": index out of range");
    }
    values_[n.id] = {boxes[i]};
    return;
  }
  if (n.target == "with_effects") {
    lower_with_effects(n);
    return;
  }
  // Python numbers are computed by the wrapper (nothing a kernel does makes one); so are the ops
  // that read them: coil's kernels take tensors only.
  if (!n.scalar_type.empty() || reads_host_scalar(n)) {
    bool makes_tensors = !n.meta.empty();
    values_[n.id] = add_extern(n, /*is_fallback=*/makes_tensors);
    return;
  }
  // Complex and uint16/32/64 tensors: coil's lowerings and promotion rules do not cover them (and
  // torch defines few ops on the unsigned ones); ATen computes whatever reads or makes one.
  // Sizes that depend on data (nonzero, unique, masked indexing: unbacked symbols u0, ...): every
  // op that makes or reads such a tensor runs in ATen, which knows the sizes when it runs.
  if (touches_opaque_dtype(n) || touches_unbacked_size(n)) {
    values_[n.id] = add_extern(n, /*is_fallback=*/true);
    return;
  }

  const Registry& reg = registry();
  auto it = reg.find(n.target);
  std::vector<TensorBox> out;
  bool lowered = false;
  size_t externs_before = prog_.externs.size();
  if (all_outputs_empty(n)) {
    // Nothing to compute, and index arithmetic over a size-0 dim would divide by zero (reshape
    // delinearizes by the sizes): every output is a zero-element constant.
    out = empty_outputs(n);
    lowered = true;
  } else if (it != reg.end()) {
    try {
      out = it->second(*this, n);
    } catch (const NeedsStaticValue& e) {
      out.clear();  // a dynamic size this lowering cannot plan for: the ATen op runs it
      prog_.fallback_reasons.push_back(n.name + " (" + n.target + "): " + e.what());
    }
    lowered = !out.empty() || n.meta.empty();
  }
  if (!lowered) out = add_extern(n, /*is_fallback=*/true);
  for (TensorBox& b : out) {
    // Results of this node's own extern calls are plain buffer reads: the node is the extern's
    // origin, not theirs. A view of an earlier node's extern result is this node's value.
    auto view = as_strided_view(b);
    bool extern_result = false;
    for (size_t e = externs_before; view && e < prog_.externs.size(); ++e) {
      const std::vector<std::string>& outs = prog_.externs[e].outputs;
      extern_result |= std::find(outs.begin(), outs.end(), view->buffer) != outs.end();
    }
    if (!extern_result) b.origins.insert(n.name);
  }
  for (size_t i = 0; i < out.size(); ++i)
    apply_realize_policy(out[i], users_of_result(n, i, out.size()));
  values_[n.id] = std::move(out);
}

// A result of a node of several results is read by the readers of its getitems, not by every
// reader of the node: native_layer_norm's output, read by one select, stays a lazy body that
// reader computes at the rows it reads, though mean and rstd have readers of their own (a
// training graph saves them). Counted as the node's readers, it was stored whole: ViT-B/16's
// last norm, 18 MB of float32 for the class token's 32 rows.
int Lowering::users_of_result(const graph::Node& n, size_t i, size_t results) const {
  auto found = result_users_.find(n.id);
  if (results <= 1 || found == result_users_.end() || found->second.size() != results)
    return user_count_.at(n.id);
  return found->second[i];
}

namespace {

// Whether e mentions a symbol that is not one of the graph's backed size symbols: a size that
// depends on data (u0 from nonzero, unique, .item(), ...).
bool unbacked(const graph::Graph& g, const Expr& e) {
  if (e.is_int()) return false;
  for (const Expr& s : sym::free_symbols(e)) {
    if (!g.symbol(s.name())) return true;
  }
  return false;
}

bool has_unbacked(const graph::Graph& g, const graph::TensorMeta& m) {
  auto any = [&](const std::vector<Expr>& v) {
    return std::any_of(v.begin(), v.end(), [&](const Expr& e) { return unbacked(g, e); });
  };
  return any(m.sizes) || any(m.strides) || unbacked(g, m.offset);
}

// Whether pred holds for some argument of n (positional or keyword, looking inside lists).
bool any_arg(const graph::Node& n, const std::function<bool(const graph::Arg&)>& pred) {
  std::vector<const graph::Arg*> stack;
  for (const auto& a : n.args) stack.push_back(&a);
  for (const auto& kv : n.kwargs) stack.push_back(&kv.second);
  while (!stack.empty()) {
    const graph::Arg* a = stack.back();
    stack.pop_back();
    if (pred(*a)) return true;
    for (const auto& item : a->list) stack.push_back(&item);
  }
  return false;
}

}  // namespace

bool Lowering::touches_unbacked_size(const graph::Node& n) const {
  auto dynamic = [&](const graph::TensorMeta& m) { return has_unbacked(g_, m); };
  if (std::any_of(n.meta.begin(), n.meta.end(), dynamic)) return true;
  return any_arg(n, [&](const graph::Arg& a) {
    if (a.kind == graph::Arg::Kind::Sym) return unbacked(g_, a.sym);
    if (a.kind != graph::Arg::Kind::Node) return false;
    const auto& metas = g_.node(a.node).meta;
    return std::any_of(metas.begin(), metas.end(), dynamic);
  });
}

bool Lowering::touches_opaque_dtype(const graph::Node& n) const {
  for (const graph::TensorMeta& m : n.meta) {
    if (graph::is_opaque(m.dtype)) return true;
  }
  return any_arg(n, [&](const graph::Arg& a) {
    if (a.kind == graph::Arg::Kind::DType) return graph::is_opaque(a.dtype);
    if (a.kind != graph::Arg::Kind::Node) return false;
    const auto& boxes = values_.at(a.node);
    return std::any_of(boxes.begin(), boxes.end(),
                       [](const TensorBox& b) { return graph::is_opaque(b.dtype); });
  });
}

bool Lowering::reads_host_scalar(const graph::Node& n) const {
  return any_arg(n, [&](const graph::Arg& a) {
    return a.kind == graph::Arg::Kind::Node && host_scalar(a.node) != nullptr;
  });
}

// with_effects(token, "op", args...): the op runs as a fallback, in the order of the graph's
// effectful ops; the new token is the old one (tokens carry no data, only the order, which the
// extern call keeps: ExternCall::has_effects).
void Lowering::lower_with_effects(const graph::Node& n) {
  graph::Node op = n;
  op.target = n.args.at(1).s;
  op.args.assign(n.args.begin() + 2, n.args.end());
  op.meta.assign(n.meta.begin() + 1, n.meta.end());
  std::vector<TensorBox> out = {box(n.args.at(0))};
  std::vector<TensorBox> results = add_extern(op, /*is_fallback=*/true);
  prog_.externs.back().has_effects = true;
  out.insert(out.end(), results.begin(), results.end());
  values_[n.id] = std::move(out);
}

void Lowering::run() {
  g_.validate();
  prog_.size_symbols = g_.symbols();
  user_count_.assign(g_.nodes().size(), 0);
  for (const graph::Node& n : g_.nodes()) {
    std::vector<const graph::Arg*> stack;
    for (const auto& a : n.args) stack.push_back(&a);
    for (const auto& kv : n.kwargs) stack.push_back(&kv.second);
    std::set<int> seen;  // a node used twice by one user counts once
    while (!stack.empty()) {
      const graph::Arg* a = stack.back();
      stack.pop_back();
      if (a->kind == graph::Arg::Kind::Node && seen.insert(a->node).second) ++user_count_[a->node];
      for (const auto& item : a->list) stack.push_back(&item);
    }
  }
  // Each result's readers, for nodes read through getitem only.
  std::set<int> read_otherwise;
  for (const graph::Node& n : g_.nodes()) {
    any_arg(n, [&](const graph::Arg& a) {
      if (a.kind != graph::Arg::Kind::Node || g_.node(a.node).meta.size() <= 1) return false;
      bool getitem = n.target == "getitem" && &a == &n.args.at(0) && n.args.size() == 2 &&
                     n.args[1].kind == graph::Arg::Kind::Int;
      if (!getitem) {
        read_otherwise.insert(a.node);
        return false;
      }
      std::vector<int>& users = result_users_[a.node];
      users.resize(g_.node(a.node).meta.size(), 0);
      int64_t i = n.args[1].i;
      if (i >= 0 && i < static_cast<int64_t>(users.size())) users[i] += user_count_[n.id];
      return false;  // (every argument visited)
    });
  }
  for (int id : read_otherwise) result_users_.erase(id);
  // The nodes the graph returns (outputs.cpp: store_output_value).
  std::set<int> returned;
  for (const graph::Node& n : g_.nodes()) {
    if (n.kind != graph::NodeKind::Output) continue;
    std::vector<const graph::Arg*> stack;
    for (const auto& a : n.args) stack.push_back(&a);
    while (!stack.empty()) {
      const graph::Arg* a = stack.back();
      stack.pop_back();
      if (a->kind == graph::Arg::Kind::Node) returned.insert(a->node);
      for (const auto& item : a->list) stack.push_back(&item);
    }
  }
  for (const graph::Node& n : g_.nodes()) {
    switch (n.kind) {
      case graph::NodeKind::Placeholder: {
        if (n.meta.empty()) {
          prog_.inputs.push_back("");
          prog_.input_symints.push_back(n.symint_value);
          continue;
        }
        prog_.input_symints.push_back(std::nullopt);
        const graph::TensorMeta& m = n.meta[0];
        ir::Buffer buf;
        buf.name = n.name;
        buf.kind = ir::Buffer::Kind::Input;
        buf.layout = {m.dtype, m.device, m.sizes, m.strides, m.offset, true};
        buf.donated = n.donated;
        prog_.buffers.push_back(buf);
        prog_.inputs.push_back(n.name);
        values_[n.id] = {read_buffer(n.name, buf.layout)};
        break;
      }
      case graph::NodeKind::Call:
        lower_node(n);
        if (returned.count(n.id) && user_count_[n.id] > 1) store_output_value(n);
        break;
      case graph::NodeKind::Output:
        lower_outputs(n);
        break;
    }
  }
  prog_.rebuild_index();
}

const Registry& registry() {
  static const Registry reg = [] {
    Registry r;
    register_pointwise(r);
    register_reductions(r);
    register_norms(r);
    register_views(r);
    register_movement(r);
    register_creation(r);
    register_indexing(r);
    register_pooling(r);
    register_externs(r);
    register_special(r);
    register_random(r);
    return r;
  }();
  return reg;
}

std::vector<std::string> lowered_ops() {
  std::set<std::string> names;
  for (const auto& [target, fn] : registry()) names.insert(target.substr(0, target.rfind('.')));
  return {names.begin(), names.end()};
}

bool keeps_op_whole(const std::string& name, bool random, bool fallback_random) {
  static const std::set<std::string> lowered = [] {
    std::vector<std::string> ops = lowered_ops();
    return std::set<std::string>(ops.begin(), ops.end());
  }();
  // detach is a no-op for coil, but AOTAutograd's min-cut partitioner does not count it as
  // fusible, so a value the backward reads through detach (tanh's output, in tanh's backward) is
  // never recomputed; its decomposition, alias, is a view the partitioner sees through.
  if (name == "aten.detach") return false;
  std::string base = name.substr(0, name.find('.', name.find('.') + 1));  // without overload
  for (const std::string& op : extra_decompositions())
    if (base == op) return false;
  if (lowered.count(name)) return true;
  // Attention stays one ATen op (a fallback, as Inductor keeps it): torch's decomposition of the
  // CPU flash-attention forward, paired with that op's own backward formula, gives wrong
  // gradients under AOTAutograd (measured on GPT-2 with an attention mask: the q/k/v projection
  // gradients were off by 10x their magnitude).
  if (name.find("scaled_dot_product") != std::string::npos) return true;
  // A decomposition redraws through other random ops (dropout through rand_like, an RNN's
  // dropout between layers), which consume the generator differently from the op's own kernel.
  return random && fallback_random;
}

std::vector<std::string> extra_decompositions() {
  return {"aten._native_batch_norm_legit_functional", "aten._batch_norm_with_update_functional",
          "aten._native_batch_norm_legit", "aten.max_pool2d_with_indices",
          "aten.max_pool2d_with_indices_backward"};
}

bool decomposes_here(const std::string& name, const std::string& device, bool low_precision) {
  bool batch_norm = name.find("batch_norm") != std::string::npos;
  return !(batch_norm && device == "cpu" && low_precision);
}

bool recomputes_in_kernels(const std::string& target) {
  static const Registry externs = [] {
    Registry r;
    register_externs(r);
    return r;
  }();
  return registry().count(target) && !externs.count(target);
}

ir::Program lower_graph(const graph::Graph& g, const LowerOptions& options) {
  ir::Program prog;
  Lowering L(g, prog, options);
  L.run();
  return prog;
}

}  // namespace coil::lower
