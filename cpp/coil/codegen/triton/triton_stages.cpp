// The Triton renderer's members and stages (triton_emitter.h): stores and scatters, pointwise
// members, reduction steps (looped over r, or the whole row in registers with persistent
// reductions; argmax/argmin through coil_argmax_combine), and each stage's text with its loop and
// results.
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "coil/codegen/triton/triton_emitter.h"
#include "coil/codegen/triton/triton_ops.h"

namespace coil::codegen::triton {

// ---- members and stages ----

// A scatter combines its value into the element its target names; updates of one element from
// different lanes combine atomically.
void Emitter::scatter_store(const ir::Buffer& b, const sched::Member& m, const std::string& var,
                            int value_dims) {
  Value target = ir::substitute_indices(b.target, m.var_map);
  std::string pos = value(target);
  int d = ir::is_constant(target) ? kNone : dims(target);
  if (d == kNone) value_dims |= kRows;
  std::string ptr = ptr_.at(b.name) + " + (" + pos + ")";
  if (b.layout.offset != Expr(0)) ptr += " - " + printer_.print(b.layout.offset);
  if ((value_dims & ~d) != 0) {
    d |= value_dims;
    ptr = "tl.broadcast_to(" + ptr + ", " + shape(d) + ")";
  }
  // Atomics take one value per pointer, in a tensor of its own (Triton's interpreter misreads
  // a broadcast view there).
  std::string value =
      var + " + tl.zeros(" + shape(d) + ", " + triton::dtype_text(b.layout.dtype) + ")";
  std::string mask = block_mask(d);
  // Relaxed: the updates need no ordering with any other memory access of the kernel.
  std::string tail = (mask.empty() ? "" : ", mask=" + mask) + ", sem=\"relaxed\")";
  std::string op = triton::scatter_op_text(b.scatter_mode, b.layout.dtype);
  if (op.empty()) {
    throw std::runtime_error(std::string("triton codegen: scatter ") +
                             ir::scatter_mode_name(b.scatter_mode) + " of " +
                             graph::dtype_name(b.layout.dtype) + " has no atomic form");
  }
  if (b.scatter_mode == ir::ScatterMode::Store) {
    line("tl.store(" + ptr + ", " + var + (mask.empty() ? ")" : ", " + mask + ")"));
    return;
  }
  line(op + "(" + ptr + ", " + value + tail);
}

void Emitter::store(const ir::Buffer& b, const sched::Member& m, const std::string& var,
                    int value_dims) {
  if (b.is_scatter()) {
    scatter_store(b, m, var, value_dims);
    return;
  }
  if (!stored(b.name)) return;
  int d = kNone;
  Expr idx = sym::substitute(b.write_index(), m.var_map);
  std::string ptr = ptr_.at(b.name) + " + (" + index_text(idx - b.layout.offset, &d) + ")";
  // One element (a 0-d output): the value may still be a one-lane block.
  if (d == kNone) value_dims |= kRows;
  // A value spanning more than its index (a full reduction's result, one row per block lane):
  // the pointers are broadcast to the value's shape; masked lanes stay unwritten.
  if ((value_dims & ~d) != 0) {
    d |= value_dims;
    ptr = "tl.broadcast_to(" + ptr + ", " + shape(d) + ")";
  }
  std::string mask = block_mask(d);
  line("tl.store(" + ptr + ", " + var + (mask.empty() ? "" : ", " + mask) + ")");
}

// Binds buffer b's value to v_<name> (cast to the buffer's dtype), makes it available, stores it.
void Emitter::finish_member(const ir::Buffer& b, const sched::Member& m, const std::string& val,
                            DType val_dtype, int d, bool check) {
  std::string var = "v_" + b.name;
  std::string text = val_dtype == b.layout.dtype
                         ? val
                         : triton::cast_text(val, val_dtype, b.layout.dtype, interpreted_);
  line(var + " = " + text);
  Expr written = sym::simplify(sym::substitute(b.write_index(), m.var_map), env_);
  available_[b.name] = {var, d, written, check};
  store(b, m, var, d);
}

void Emitter::emit_pointwise(const sched::Member& m) {
  const ir::Buffer& b = prog_.buffers[m.buffer];
  Value body = kernel_body(m);
  std::string val = value(body);
  finish_member(b, m, val, body.dtype(), ir::is_constant(body) ? kNone : dims(body), false);
}

std::string Emitter::full_block(const std::string& v, Value value) {
  int d = dims(value);
  if (d == (kRows | kCols) && value.op() != Op::Constant) return v;
  std::string name = "tmp" + std::to_string(next_tmp_++);
  if (d == kNone || value.op() == Op::Constant) {
    // the same in every lane: a one-lane block (tl.full([1], ...)) whose rank broadcast_to
    // refuses to change; where broadcasts it as binary ops do
    line(name + " = tl.where(tl.full([XBLOCK, RBLOCK], True, tl.int1), " + v + ", " + v + ")");
  } else {
    line(name + " = tl.broadcast_to(" + v + ", [XBLOCK, RBLOCK])");
  }
  return name;
}

// The row-major position of member m's reduction element within its own reduction ranges.
std::string Emitter::arg_position(const sched::Member& m) {
  const ir::Buffer& b = prog_.buffers[m.buffer];
  Expr pos = 0;
  for (size_t j = 0; j < b.reduction_ranges.size(); ++j) {
    pos = pos * b.reduction_ranges[j] + m.var_map.at(ir::reduction_var(static_cast<int>(j)));
  }
  int d = kNone;
  std::string text = index_text(pos, &d);
  std::string name = "tmp" + std::to_string(next_tmp_++);
  if (d == kNone) {
    line(name + " = tl.full([XBLOCK, RBLOCK], " + text + ", " + index_dtype() + ")");
  } else {
    line(name + " = tl.broadcast_to(" + text + ", [XBLOCK, RBLOCK])");
  }
  return name;
}

// One reduction member inside its stage: the per-element combine (looped) or the whole-row
// reduction (persistent).
void Emitter::emit_reduction_step(const sched::Member& m) {
  const ir::Buffer& b = prog_.buffers[m.buffer];
  Value body = kernel_body(m);
  DType t = body.dtype();
  ir::ReductionType rt = *b.reduction;
  std::string v = full_block(value(body), body);
  std::string acc = "acc_" + b.name, acci = "acci_" + b.name;
  std::string mask = plan_.rmask ? "rmask" : "";
  std::string combine =
      rt == ir::ReductionType::ArgMax ? "coil_argmax_combine" : "coil_argmin_combine";
  if (plan_.persistent) {
    std::string masked = v;
    if (!mask.empty()) {
      masked = "tmp" + std::to_string(next_tmp_++);
      line(masked + " = tl.where(" + mask + ", " + v + ", " + triton::reduction_identity(rt, t) +
           ")");
    }
    if (!is_arg(rt)) {
      pending_results_.push_back({&m, triton::reduction_final(rt, t, masked), t});
      return;
    }
    std::string pos = arg_position(m);
    if (!mask.empty()) {
      std::string p = "tmp" + std::to_string(next_tmp_++);
      line(p + " = tl.where(" + mask + ", " + pos + ", " + kNoIndex + ")");
      pos = p;
    }
    line("_, " + acci + " = tl.reduce((" + masked + ", " + pos + "), 1, " + combine + ")");
    pending_results_.push_back({&m, acci + "[:, None]", int64_ ? DType::Int64 : DType::Int32});
    return;
  }
  if (!is_arg(rt)) {
    std::string next = triton::reduction_combine(rt, t, acc, v);
    line(acc + " = " + (mask.empty() ? next : "tl.where(" + mask + ", " + next + ", " + acc + ")"));
    return;
  }
  std::string pos = arg_position(m);
  if (mask.empty()) {
    line(acc + ", " + acci + " = " + combine + "(" + acc + ", " + acci + ", " + v + ", " + pos +
         ")");
    return;
  }
  line(acc + "_next, " + acci + "_next = " + combine + "(" + acc + ", " + acci + ", " + v + ", " +
       pos + ")");
  line(acc + " = tl.where(" + mask + ", " + acc + "_next, " + acc + ")");
  line(acci + " = tl.where(" + mask + ", " + acci + "_next, " + acci + ")");
}

void Emitter::emit_scan_step(const sched::Member& m) {
  const ir::Buffer& b = prog_.buffers[m.buffer];
  Value body = kernel_body(m);
  DType t = body.dtype();
  ir::ReductionType rt = *b.scan;
  std::string v = full_block(value(body), body);
  std::string masked = v;
  if (plan_.rmask) {
    masked = "tmp" + std::to_string(next_tmp_++);
    line(masked + " = tl.where(rmask, " + v + ", " + triton::reduction_identity(rt, t) + ")");
  }
  std::string scanned = "tmp" + std::to_string(next_tmp_++);
  line(scanned + " = " + triton::scan_text(rt, t, masked));
  if (!plan_.persistent) {
    // The blocks before this one, combined into each lane of it.
    std::string carry = "carry_" + b.name;
    std::string with_carry = "tmp" + std::to_string(next_tmp_++);
    line(with_carry + " = " + triton::reduction_combine(rt, t, carry, scanned));
    line(carry + " = " +
         triton::reduction_combine(rt, t, carry, triton::reduction_final(rt, t, masked)));
    scanned = with_carry;
  }
  finish_member(b, m, scanned, t, kRows | kCols, false);
}

void Emitter::render_stage(const sched::Stage& stage, int index) {
  stage_needs_barrier_ = false;
  if (!stage.inner) {
    std::ostringstream text;
    std::ostringstream* saved = out_;
    out_ = &text;
    for (int mi : stage.members) emit_pointwise(k_.members[mi]);
    out_ = saved;
    emit_stage_text(stage, index, text.str(), indent_);
    return;
  }
  std::vector<const sched::Member*> reductions;
  for (int mi : stage.members) {
    const sched::Member& m = k_.members[mi];
    if (prog_.buffers[m.buffer].is_reduction()) reductions.push_back(&m);
  }
  std::ostringstream text;
  std::ostringstream* saved = out_;
  out_ = &text;
  int outer_indent = indent_;
  std::set<std::string> outer_used = used_;
  if (!plan_.persistent) {
    for (const sched::Member* m : reductions) {
      const ir::Buffer& b = prog_.buffers[m->buffer];
      DType t = b.body.dtype();
      line("acc_" + b.name + " = tl.full([XBLOCK, RBLOCK], " +
           triton::reduction_identity(*b.reduction, t) + ", " + triton::dtype_text(t) + ")");
      if (is_arg(*b.reduction)) {
        line("acci_" + b.name + " = tl.full([XBLOCK, RBLOCK], " + kNoIndex + ", " + index_dtype() +
             ")");
      }
    }
    for (int mi : stage.members) {
      const ir::Buffer& b = prog_.buffers[k_.members[mi].buffer];
      if (!b.is_scan()) continue;
      DType t = b.body.dtype();
      line("carry_" + b.name + " = tl.full([XBLOCK, 1], " + triton::reduction_identity(*b.scan, t) +
           ", " + triton::dtype_text(t) + ")");
    }
    line("for roffset in range(0, rnumel, RBLOCK):");
    ++indent_;
    used_.clear();
    line("rindex = roffset + rbase");
    if (plan_.rmask) line("rmask = rindex < rnumel");
    memo_.emplace_back();
  }
  std::map<std::string, Available> saved_available = available_;
  size_t body_start = text.str().size();
  for (int mi : stage.members) {
    const sched::Member& m = k_.members[mi];
    if (prog_.buffers[m.buffer].is_reduction()) {
      emit_reduction_step(m);
    } else if (prog_.buffers[m.buffer].is_scan()) {
      emit_scan_step(m);
    } else {
      emit_pointwise(m);
    }
  }
  std::string stage_text = text.str();
  if (!plan_.persistent) {
    memo_.pop_back();
    // r variables go right after rindex, inside the loop.
    std::string defs;
    for (size_t j = 0; j < cols_.vars.size(); ++j) {
      if (!used_.count(cols_.vars[j].name())) continue;
      defs += std::string(indent_ * 4, ' ') + cols_.vars[j].name() + " = " +
              var_definition(j, cols_.sizes, cols_.flat) + "\n";
    }
    for (const std::string& u : used_) outer_used.insert(u);
    used_ = outer_used;
    stage_text.insert(body_start, defs);
    --indent_;
    available_ = saved_available;
    // Results of the loop: one value per x point.
    out_ = &text;
    text.str("");
    for (const sched::Member* m : reductions) {
      const ir::Buffer& b = prog_.buffers[m->buffer];
      DType t = b.body.dtype();
      if (is_arg(*b.reduction)) {
        line("_, " + std::string("acci_") + b.name + " = tl.reduce((acc_" + b.name + ", acci_" +
             b.name + "), 1, " +
             (*b.reduction == ir::ReductionType::ArgMax ? "coil_argmax_combine"
                                                        : "coil_argmin_combine") +
             ")");
        pending_results_.push_back(
            {m, "acci_" + b.name + "[:, None]", int64_ ? DType::Int64 : DType::Int32});
      } else {
        pending_results_.push_back(
            {m, triton::reduction_final(*b.reduction, t, "acc_" + b.name), t});
      }
    }
    stage_text += text.str();
  } else {
    // Persistent: values of the whole row stay in registers for later stages, as long as a reader
    // loads them at the index they were written.
    for (auto& [name, a] : available_) {
      if (!saved_available.count(name)) a.check = true;
    }
  }
  text.str("");
  out_ = &text;
  for (const PendingResult& r : pending_results_) {
    const ir::Buffer& b = prog_.buffers[r.member->buffer];
    finish_member(b, *r.member, r.text, r.dtype, kRows, false);
  }
  pending_results_.clear();
  stage_text += text.str();
  out_ = saved;
  emit_stage_text(stage, index, stage_text, outer_indent);
}

void Emitter::emit_stage_text(const sched::Stage& stage, int index, const std::string& text,
                              int indent) {
  std::string members;
  for (int mi : stage.members) {
    const ir::Buffer& b = prog_.buffers[k_.members[mi].buffer];
    members += " " + b.name +
               (b.is_reduction() ? std::string("[") + ir::reduction_name(*b.reduction) + "]" : "");
  }
  std::string pad(indent * 4, ' ');
  if (reduction_) {
    *out_ << pad << "# stage " << index << " ("
          << (stage.inner ? (plan_.persistent ? "whole row" : "loop over r") : "per x point")
          << "):" << members << "\n";
  }
  if (stage_needs_barrier_)
    *out_ << pad << "tl.debug_barrier()  # reads values stored by an earlier stage\n";
  *out_ << text;
}

}  // namespace coil::codegen::triton
