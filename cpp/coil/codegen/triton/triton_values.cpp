// The Triton renderer's values (triton_emitter.h): each scalar IR value of a member's body as a
// line of Triton (loads with their masks, indirect indices checked through coil_index, casts,
// where, unary and binary ops through the op table triton_ops.h), and the divisions that must be
// IEEE-exact.
#include <string>
#include <vector>

#include "coil/codegen/triton/triton_emitter.h"
#include "coil/codegen/triton/triton_ops.h"

namespace coil::codegen::triton {

// ---- values ----

const std::string* Emitter::lookup(Value v) const {
  for (auto it = memo_.rbegin(); it != memo_.rend(); ++it) {
    auto f = it->find(v.get());
    if (f != it->end()) return &f->second;
  }
  return nullptr;
}

int Emitter::dims(Value v) const {
  auto it = dims_.find(v.get());
  return it == dims_.end() ? kNone : it->second;
}

// An operand's text. A constant is a bare literal where it meets a tensor in an infix operator
// or tl.where/tl.maximum (Triton gives it that tensor's type); elsewhere a typed tensor.
std::string Emitter::operand(Value v, bool literal_ok) const {
  if (v.op() == Op::Constant) {
    // Triton's interpreter cannot make a literal into the 16-bit float it meets (its builder has
    // no get_bf16): there, 16-bit constants are typed tensors, of the same type.
    bool reduced = v.dtype() == DType::BFloat16 || v.dtype() == DType::Float16;
    if (interpreted_ && reduced) literal_ok = false;
    return literal_ok ? triton::literal_text(v) : triton::constant_tensor_text(v);
  }
  return *lookup(v);
}

bool Emitter::literal_friendly(Op op, DType d) {
  switch (op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::Eq:
    case Op::Ne:
    case Op::Maximum:
    case Op::Minimum:
    case Op::BitwiseAnd:
    case Op::BitwiseOr:
    case Op::BitwiseXor:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor:
    case Op::Fmod:
      return true;
    case Op::TruncDiv:
      return !graph::is_floating(d);
    default:
      return false;
  }
}

// ---- indirect indices (see ir/scalar.h) ----

// v's index with each indirect symbol replaced by a temporary holding its checked position
// (coil_index: wrapped, reported where out of bounds and the access happens, 0 there).
Expr Emitter::checked_index(Value v) {
  std::vector<Expr> syms = ir::indirect_symbols(v->index);
  if (syms.empty()) return v->index;
  std::vector<Value> raw = ir::indirect_operands(v);
  sym::ExprMap repl;
  for (size_t i = 0; i < syms.size(); ++i) {
    const ir::Indirect* b = ir::indirect_of(syms[i]);
    int d = dims(raw[i]);
    int mdims = v->masked ? dims(v->args[0]) : kNone;
    std::string active = block_mask(d | mdims);
    if (v->masked) active = operand(v->args[0], false) + (active.empty() ? "" : " & " + active);
    std::string name = "tmp" + std::to_string(next_tmp_++);
    line(name + " = coil_index(" + operand(raw[i], false) + ", " + printer_.print(b->size) + ", " +
         (b->wrap ? "True" : "False") + ", " + (active.empty() ? "True" : active) + ", " +
         kIndexErrorArg + ")");
    Expr t = Expr::symbol(name);
    env_.add_index_var(t, b->size);
    checked_dims_[name] = d;
    repl[syms[i]] = t;
  }
  return sym::substitute(v->index, repl);
}

std::string Emitter::load_text(Value v, int* out_dims) {
  int idims = kNone;
  std::string idx = index_text(checked_index(v) - prog_.buffer(v->buffer).layout.offset, &idims);
  std::string ptr = ptr_.at(v->buffer) + " + (" + idx + ")";
  int mdims = v->masked ? dims(v->args[0]) : kNone;
  int all = idims | mdims;
  std::string mask = block_mask(all);
  if (v->masked) mask = operand(v->args[0], false) + (mask.empty() ? "" : " & " + mask);
  // A mask spanning more than the index: the pointers are broadcast to the mask's shape.
  if ((mdims & ~idims) != 0) ptr = "tl.broadcast_to(" + ptr + ", " + shape(all) + ")";
  // A mask the same in every lane is a one-lane block (a constant: tl.full([1], ...)); the
  // pointer must be a block too (fuzzer seed 750012: a cat's piece read at index 0).
  if (v->masked && all == kNone) ptr += " + tl.zeros([1], tl.int32)";
  *out_dims = all;
  if (mask.empty()) return "tl.load(" + ptr + ")";
  std::string other = graph::is_floating(v.dtype()) ? "0.0" : "0";
  return "tl.load(" + ptr + ", " + mask + ", other=" + other + ")";
}

// Emits the lines computing root; returns its text (a tmp name, or a typed constant).
std::string Emitter::value(Value root) {
  std::vector<Value> order = ir::topo_order({root});
  mark_exact_divisions(order);
  for (const Value& v : order) {
    if (v.op() == Op::Constant || lookup(v)) continue;
    std::string text;
    int d = kNone;
    switch (v.op()) {
      case Op::Guard:
        checked_index(v);
        memo_.back()[v.get()] = operand(v->args[0], false);
        dims_[v.get()] = dims(v->args[0]);
        continue;
      case Op::IndexExpr: {
        std::string e = index_text(checked_index(v), &d);
        if (d == kNone && sym::free_symbols(sym::simplify(v->index, env_)).empty()) {
          text = "tl.full([1], " + e + ", " + triton::dtype_text(v.dtype()) + ")";
        } else {
          text = "(" + e + ").to(" + triton::dtype_text(v.dtype()) + ")";
        }
        break;
      }
      case Op::Load: {
        auto avail = available_.find(v->buffer);
        if (avail != available_.end() && !ir::has_indirect(v->index) &&
            (!avail->second.check || sym::simplify(v->index, env_) == avail->second.index)) {
          memo_.back()[v.get()] = avail->second.var;
          dims_[v.get()] = avail->second.dims;
          continue;
        }
        // A value this kernel stored in an earlier stage: other threads of the block wrote it.
        if (member_of(v->buffer)) stage_needs_barrier_ = true;
        text = load_text(v, &d);
        break;
      }
      case Op::Cast:
        text = triton::cast_text(operand(v->args[0], false), v->args[0].dtype(), v.dtype(),
                                 interpreted_);
        d = dims(v->args[0]);
        break;
      case Op::Where: {
        bool a_const = ir::is_constant(v->args[1]), b_const = ir::is_constant(v->args[2]);
        text = "tl.where(" + operand(v->args[0], false) + ", " + operand(v->args[1], !b_const) +
               ", " + operand(v->args[2], !a_const) + ")";
        d = dims(v->args[0]) | dims(v->args[1]) | dims(v->args[2]);
        break;
      }
      default:
        if (v->args.size() == 1) {
          text = triton::unary_text(v.op(), operand(v->args[0], false), v->args[0].dtype());
          d = dims(v->args[0]);
        } else if (v.op() == Op::Div && exact_divs_.count(v.get())) {
          text = "tl.math.div_rn(" + operand(v->args[0], false) + ", " +
                 operand(v->args[1], false) + ")";
          d = dims(v->args[0]) | dims(v->args[1]);
        } else {
          Value a = v->args[0], b = v->args[1];
          bool ok = literal_friendly(v.op(), a.dtype());
          text = triton::binary_text(v.op(), operand(a, ok && !ir::is_constant(b)),
                                     operand(b, ok && !ir::is_constant(a)), a.dtype());
          d = dims(a) | dims(b);
        }
    }
    std::string name = "tmp" + std::to_string(next_tmp_++);
    line(name + " = " + text);
    memo_.back()[v.get()] = name;
    dims_[v.get()] = d;
  }
  if (root.op() == Op::Constant) return triton::constant_tensor_text(root);
  return *lookup(root);
}

// Triton's float32 `/` is approximate (div.full.f32, up to 2 ulp): 4.6875 / 0.9375 can come
// out just below 5. Where a rounding op reads a quotient (through casts), one ulp changes
// the result by a whole unit, so those divisions are rendered IEEE-exact, as eager computes
// them; every other division keeps the fast form.
void Emitter::mark_exact_divisions(const std::vector<Value>& order) {
  for (const Value& v : order) {
    switch (v.op()) {
      case Op::Floor:
      case Op::Ceil:
      case Op::Trunc:
      case Op::Round: {
        Value q = v->args[0];
        while (q.op() == Op::Cast) q = q->args[0];
        if (q.op() == Op::Div && q.dtype() == DType::Float32) exact_divs_.insert(q.get());
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace coil::codegen::triton
