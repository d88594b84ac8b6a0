// A C++ kernel's reduction loops (cpp_emitter.h): each stage's r loops with their accumulators,
// in scalar, vector or column form; SIMD reduction clauses, chunked float sums, and column
// kernels that split their rows across threads.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_ops.h"
#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

// " reduction(op:acc, ...)" clauses for a loop whose reductions all have a SIMD form (sums,
// and max/min through the prelude's NaN-propagating declared reductions); "" when one has
// none (products, any/all, arg-reductions, Welford): that loop stays scalar.
std::string Emitter::simd_reduction_clauses(
    const std::vector<const sched::Member*>& reductions) const {
  std::map<std::string, std::string> by_op;
  for (const sched::Member* m : reductions) {
    const ir::Buffer& b = prog_.buffers[m->buffer];
    DType t = b.body.dtype();
    bool f32 = t == DType::Float32, f64 = t == DType::Float64;
    bool integer = !graph::is_floating(t) && t != DType::Bool;
    std::string op;
    switch (*b.reduction) {
      case ir::ReductionType::Sum:
        if (f32 || f64 || integer) op = "+";
        break;
      case ir::ReductionType::Max:
        op = f32 ? "coil_max_f" : f64 ? "coil_max_d" : integer ? "max" : "";
        break;
      case ir::ReductionType::Min:
        op = f32 ? "coil_min_f" : f64 ? "coil_min_d" : integer ? "min" : "";
        break;
      default:
        break;
    }
    if (op.empty()) return "";
    std::string& list = by_op[op];
    list += (list.empty() ? "" : ", ") + std::string("acc_") + b.name;
  }
  std::string out;
  for (const auto& [op, list] : by_op) out += " reduction(" + op + ":" + list + ")";
  return out;
}

void Emitter::render_stage(const sched::Stage& stage) {
  if (!stage.inner) {
    lane_pieces([&] {
      each_row([&] {
        for (int mi : stage.members) emit_pointwise(k_.members[mi]);
      });
    });
    return;
  }
  // Column mode keeps its lane loops scalar (omp simd over a block of x points).
  if (k_.rsizes.empty()) {  // a reduction over no dims (of a 0-d tensor)
    if (rows_ > 1) throw NoRowGroup{};
    render_reduction_loops(stage, false);
    return;
  }
  std::string r = "r" + std::to_string(k_.rsizes.size() - 1);
  auto trip = k_.rsizes.back().as_int();
  bool allowed = vectorize_ && !column() && (!trip || *trip >= min_trip_);
  // (Nothing is noted where vectorization is off or column mode keeps its own lane loops.)
  std::string why = column() || !vectorize_ ? "" : "too few iterations";
  with_vector_attempt(r, allowed, why, [&](bool vector) { render_reduction_loops(stage, vector); });
}

bool Emitter::invariant_along(Value v, const std::vector<Expr>& vars, bool point_results,
                              std::unordered_map<const ir::ScalarNode*, bool>& known) const {
  auto found = known.find(v.get());
  if (found != known.end()) return found->second;
  auto free_of_vars = [&](const Expr& e) {
    for (const Expr& s : sym::free_symbols(e)) {
      if (std::find(vars.begin(), vars.end(), s) != vars.end()) return false;
    }
    return !ir::has_indirect(e);
  };
  bool invariant = false;
  switch (v.op()) {
    case Op::Constant:
      invariant = true;
      break;
    case Op::IndexExpr:
      invariant = free_of_vars(v->index);
      break;
    case Op::Load:
      // A result of this x point's earlier loops (read where it is held, not from memory), or an
      // element of a tensor this kernel only reads, the same along the loops (a scale per head:
      // Swin V2's exp(clamp(logit_scale)) was computed at every step of its softmax).
      invariant = !v->masked && !ir::has_indirect(v->index) &&
                  ((point_results && available_.count(v->buffer)) ||
                   (free_of_vars(v->index) && hoistable_read(v)));
      break;
    case Op::Guard:
      break;
    default:
      invariant = !v->args.empty();
      for (const Value& a : v->args)
        invariant = invariant && invariant_along(a, vars, point_results, known);
  }
  known[v.get()] = invariant;
  return invariant;
}

std::vector<Expr> Emitter::r_vars() const {
  std::vector<Expr> vars;
  for (size_t j = 0; j < k_.rsizes.size(); ++j)
    vars.push_back(Expr::symbol("r" + std::to_string(j)));
  return vars;
}

std::vector<Value> Emitter::row_invariant_roots(const sched::Stage& stage,
                                                const std::function<bool(Value)>& wanted) {
  std::vector<Expr> vars = r_vars();
  std::unordered_map<const ir::ScalarNode*, bool> known;
  std::set<const ir::ScalarNode*> seen;
  std::vector<Value> roots;
  std::function<void(Value)> visit = [&](Value v) {
    if (!seen.insert(v.get()).second || lookup(v)) return;
    bool leaf = v.op() == Op::Constant || v.op() == Op::Load || v.op() == Op::IndexExpr;
    if (!leaf && wanted(v) && invariant_along(v, vars, true, known)) {
      roots.push_back(v);
      return;
    }
    for (const Value& a : v->args) visit(a);
  };
  for (int mi : stage.members) visit(kernel_body(k_.members[mi]));
  return roots;
}

bool Emitter::hoistable_read(Value v) const {
  // (A row of no elements reads nothing: read before its loop, the element must exist, so every
  // reduced dim must be known not to be empty.)
  for (const Expr& e : k_.rsizes) {
    if (sym::bounds(e, env_).lo < 1) return false;
  }
  // Read-only: no output of the kernel shares the read's storage (an in-place output).
  const std::string& p = ptr_.at(v->buffer);
  for (const KernelArg& a : args_) {
    if (a.written && ptr_.count(a.buffer) && ptr_.at(a.buffer) == p) return false;
  }
  return true;
}

void Emitter::hoist_row_invariants(const sched::Stage& stage) {
  if (column() || k_.rsizes.empty()) return;
  for (const Value& v : row_invariant_roots(stage, [](Value) { return true; })) value(v);
}

void Emitter::hoist_column_invariants(const sched::Stage& stage) {
  column_hoisted_.clear();
  if (!column() || k_.rsizes.empty()) return;
  // (Floating values only: the per-lane arrays are float or double vectors' lanes.)
  std::vector<Value> hoisted = row_invariant_roots(stage, [&](Value v) {
    DType d = v.dtype();
    return graph::is_floating(d) && (d != DType::Float64 || !lanes_vec_);
  });
  if (hoisted.empty()) return;
  std::string block = std::to_string(k_.column_block);
  std::vector<std::string> arrays;
  for (const Value& v : hoisted) {
    std::string array = "h" + std::to_string(next_tmp_++);
    std::string t = is_half(v.dtype()) && lanes_vec_ ? "float" : ctype(v.dtype());
    line(t + " " + array + "[" + block + "];");
    arrays.push_back(array);
  }
  lanes(true, "0", "xn", [&] {
    for (size_t i = 0; i < hoisted.size(); ++i) {
      std::string val = value(hoisted[i]);
      if (lanes_vec_) {
        line(vec_operand(val, hoisted[i].dtype()) + ".store(" + arrays[i] + " + xi, " +
             vec_->count + ");");
      } else {
        line(arrays[i] + "[xi] = " + val + ";");
      }
    }
  });
  for (size_t i = 0; i < hoisted.size(); ++i) column_hoisted_[hoisted[i].get()] = arrays[i];
}

// The r loops of a stage with their accumulators (vectors of them when `vector`: the innermost
// r loop runs in vector form), and the results they leave for each x point.
namespace {
// any/all over bools: in a vector loop, a mask vector (coil_vany/coil_vall at the end).
bool is_mask_reduction(const ir::Buffer& b) {
  return b.body.dtype() == DType::Bool &&
         (*b.reduction == ir::ReductionType::Any || *b.reduction == ir::ReductionType::All);
}
}  // namespace

void Emitter::render_reduction_loops(const sched::Stage& stage, bool vector) {
  // Row groups run vector loops only (a scalar loop renders the kernel one row at a time).
  if (rows_ > 1 && !vector) throw NoRowGroup{};
  each_row([&] { hoist_row_invariants(stage); });
  hoist_column_invariants(stage);
  // Accumulators for the reductions of this loop (one per lane in column mode).
  std::vector<const sched::Member*> reductions;
  bool all_sums = true;
  std::string block = column() ? "[" + std::to_string(k_.column_block) + "]" : "";
  for (int mi : stage.members) {
    const sched::Member& m = k_.members[mi];
    const ir::Buffer& b = prog_.buffers[m.buffer];
    if (!b.is_reduction()) continue;
    reductions.push_back(&m);
    DType acc = b.body.dtype();
    std::string init = reduction_identity(*b.reduction, acc);
    all_sums &= *b.reduction == ir::ReductionType::Sum && graph::is_floating(acc);
    if (vector) {
      lane_type(acc);
      bool arg = is_arg_reduction(b);
      if (is_mask_reduction(b)) {
        // any/all of bools: a mask vector OR-ed (AND-ed) with each step's mask, in the lanes of
        // the floats the mask is made from.
        if (!vec_->elem) {
          DType lanes = DType::Float32;
          for (const Value& v : ir::topo_order({kernel_body(m)})) {
            if (v.op() == Op::Load && v.dtype() == DType::Float64) lanes = DType::Float64;
          }
          lane_type(lanes);
        }
        each_row([&] {
          line(vec() + " vacc_" + b.name + sfx() + " = coil_vmask<" + vec() + ">(" + init + ");");
        });
        continue;
      }
      if (acc == DType::Bool || (!arg && !vec_combine_text(*b.reduction, "a", "b"))) {
        throw NoVectorForm{std::string(ir::reduction_name(*b.reduction)) + " reduction"};
      }
      if (arg && !vector_arg_reduction(b)) {
        throw NoVectorForm{std::string(ir::reduction_name(*b.reduction)) +
                           " reduction over float64 lanes or 2^31 elements or more"};
      }
      each_row([&] {
        line(vec() + " vacc_" + b.name + sfx() + "(" + init + ");");
        if (arg) line("VecI vidx_" + b.name + sfx() + "(0);");
      });
      continue;
    }
    bool arg = is_arg_reduction(b);
    if (lanes_vec_ && !arg && !vec_combine_text(*b.reduction, "a", "b")) {
      throw NoVectorForm{std::string(ir::reduction_name(*b.reduction)) + " reduction"};
    }
    if (lanes_vec_ && arg) {
      // Vector column arg-reductions: float32 lanes (16-bit values compare exactly in them) and
      // int32 positions (coil_vcol_arg_step).
      lane_type(acc);
      if (!vector_arg_reduction(b)) {
        throw NoVectorForm{std::string(ir::reduction_name(*b.reduction)) +
                           " reduction over float64 lanes or 2^31 elements or more"};
      }
      acc = DType::Float32;
      init = reduction_identity(*b.reduction, acc);
    }
    line(ctype(acc) + " acc_" + b.name + block + (column() ? ";" : " = " + init + ";"));
    if (arg) {
      line(std::string(lanes_vec_ ? "int32_t" : "int64_t") + " acci_" + b.name + block +
           (column() ? ";" : " = 0;"));
    }
    if (column()) {
      line("for (int64_t xi = 0; xi < xn; ++xi) acc_" + b.name + "[xi] = " + init + ";");
      if (is_arg_reduction(b))
        line("for (int64_t xi = 0; xi < xn; ++xi) acci_" + b.name + "[xi] = 0;");
    }
  }
  std::string sum_list;
  for (const auto* m : reductions) {
    sum_list += (sum_list.empty() ? "" : ", ") + std::string(vector ? "vacc_" : "acc_") +
                prog_.buffers[m->buffer].name;
  }
  std::string simd_clauses = simd_reduction_clauses(reductions);
  // A kernel reducing everything to one value (no x loops) splits its sums across threads;
  // otherwise the x loops carry the parallelism. Every stage of such a kernel is a loop of its
  // own, so each splits: what a later one reads of an earlier one (its sums, or values kept in
  // the output by a row cache) is whole once the earlier loop's threads have joined, and the
  // members after the last loop (a 16-bit sum's cast) run once, after it.
  Expr rwork = 1;
  for (const Expr& e : k_.rsizes) rwork = rwork * e;
  bool split_sums = k_.xsizes.empty() && all_sums && !reductions.empty() &&
                    (!rwork.as_int() || *rwork.as_int() >= kParallelMinElements);
  size_t nr = k_.rsizes.size();
  bool split_cols = split_columns() && !reductions.empty();
  std::string arrays;  // split_cols: the block accumulators, as OpenMP array sections
  for (const auto* m : reductions)
    arrays += (arrays.empty() ? "" : ", ") + std::string("acc_") + prog_.buffers[m->buffer].name +
              "[:" + std::to_string(k_.column_block) + "]";
  // Float sums run in chunks of the outer r loop (chunked_sums): each chunk has accumulators of
  // its own, added into the totals when it ends.
  std::vector<const sched::Member*> chunked;
  int64_t chunk = nr ? chunk_steps(reductions, vector, chunked) : 0;
  std::string r0_begin = "0", r0_end = nr ? sym::to_cpp(k_.rsizes[0], env_) : "";
  if (chunk) {
    std::string c = std::to_string(chunk);
    if (split_sums) line("#pragma omp parallel for reduction(+:" + sum_list + ")");
    if (split_cols) line("#pragma omp parallel for reduction(+:" + arrays + ")");
    line("for (int64_t r0c = 0; r0c < " + r0_end + "; r0c += " + c + ") {");
    ++indent_;
    for (const auto* m : chunked) {
      const ir::Buffer& b = prog_.buffers[m->buffer];
      std::string t = ctype(b.body.dtype()),
                  init = reduction_identity(*b.reduction, b.body.dtype());
      if (vector) {
        each_row([&] {
          std::string n = b.name + sfx();
          line(vec() + "& vacc_" + n + "_total = vacc_" + n + ";");
          line(vec() + " vacc_" + n + "(" + init + ");");
        });
      } else if (column()) {
        line(t + " (&acc_" + b.name + "_total)" + block + " = acc_" + b.name + ";");
        line(t + " acc_" + b.name + block + ";");
        line("for (int64_t xi = 0; xi < xn; ++xi) acc_" + b.name + "[xi] = " + init + ";");
      } else {
        line(t + "& acc_" + b.name + "_total = acc_" + b.name + ";");
        line(t + " acc_" + b.name + " = " + init + ";");
      }
    }
    r0_begin = "r0c";
    r0_end = "std::min<int64_t>(" + r0_end + ", r0c + " + c + ")";
  }
  // Column sums read kColumnUnroll rows per pass over the row (column_unroll).
  bool unroll = !vector && column_unroll(stage);
  std::string unroll_begin, unroll_end, unroll_main_end;
  for (size_t j = 0; j + (vector ? 1 : 0) < nr; ++j) {
    std::string r = "r" + std::to_string(j);
    bool innermost = j + 1 == nr && !column();
    if (j == 0 && split_sums && !chunk) {
      line(std::string("#pragma omp parallel for") + (innermost ? " simd" : "") +
           " reduction(+:" + sum_list + ")");
    } else if (j == 0 && split_cols && !chunk) {
      line("#pragma omp parallel for reduction(+:" + arrays + ")");
    } else if (innermost && reductions.empty()) {
      line("#pragma omp simd");
    } else if (innermost && !simd_clauses.empty()) {
      // Sums may be reassociated across SIMD lanes (as eager's vectorized sums are); max and
      // min combine exactly in any order.
      line("#pragma omp simd" + simd_clauses);
    }
    std::string begin = j == 0 ? r0_begin : "0";
    std::string end = j == 0 ? r0_end : sym::to_cpp(k_.rsizes[j], env_);
    if (unroll && j + 1 == nr) {
      // Whole groups of rows first; the rest (fewer than a group) one row at a time below.
      std::string u = std::to_string(kColumnUnroll);
      unroll_begin = begin;
      unroll_end = end;
      unroll_main_end = "(" + begin + ") + ((" + end + ") - (" + begin + ")) / " + u + " * " + u;
      line("for (int64_t " + r + "u = " + begin + "; " + r + "u < " + unroll_main_end + "; " + r +
           "u += " + u + ") {");
      ++indent_;
      continue;
    }
    line("for (int64_t " + r + " = " + begin + "; " + r + " < " + end + "; ++" + r + ") {");
    ++indent_;
  }
  // The end of a chunk: its sums go into the totals.
  auto close_chunk = [&] {
    if (!chunk) return;
    for (const auto* m : chunked) {
      const std::string& n = prog_.buffers[m->buffer].name;
      if (vector) {
        each_row([&] {
          std::string g = n + sfx();
          line("vacc_" + g + "_total = vacc_" + g + "_total + vacc_" + g + ";");
        });
      } else if (column()) {
        line("for (int64_t xi = 0; xi < xn; ++xi) acc_" + n + "_total[xi] = acc_" + n +
             "_total[xi] + acc_" + n + "[xi];");
      } else {
        line("acc_" + n + "_total = acc_" + n + "_total + acc_" + n + ";");
      }
    }
    --indent_;
    line("}");
  };
  auto body = [&] {
    if (vector) emit_row_prefetches();
    // (In a row group: each point of the group in turn.)
    each_row([&] {
      memo_.emplace_back();
      lane_pieces([&] {
        std::map<std::string, std::string> saved_available = available_;
        for (int mi : stage.members) {
          const sched::Member& m = k_.members[mi];
          const ir::Buffer& b = prog_.buffers[m.buffer];
          if (!b.is_reduction()) {
            emit_pointwise(m);
            continue;
          }
          std::string val = value(kernel_body(m));
          if (vector && is_arg_reduction(b)) {
            line("coil_varg_step<" + std::string(arg_is_max(b) ? "true" : "false") + ">(vacc_" +
                 b.name + sfx() + ", vidx_" + b.name + sfx() + ", " +
                 vec_operand(val, b.body.dtype()) + ", " + arg_position(m) + ", " + vec_->count +
                 ");");
            continue;
          }
          if (vector) {
            std::string acc = "vacc_" + b.name + sfx();
            std::string step = vec_operand(val, b.body.dtype());
            std::string combined =
                is_mask_reduction(b)
                    ? "(" + acc + (*b.reduction == ir::ReductionType::Any ? " | " : " & ") + step +
                          ")"
                    : *vec_combine_text(*b.reduction, acc, step);
            // Lanes past the end of the row keep the accumulator.
            line(acc + " = " + vec() + "::set(" + acc + ", " + combined + ", " + vec_->count +
                 ");");
            continue;
          }
          accumulate(m, val);
        }
        available_ = saved_available;
      });
      memo_.pop_back();
    });
  };
  if (vector) {
    std::string pragma = nr == 1 && split_sums && !chunk
                             ? "#pragma omp parallel for reduction(+:" + sum_list + ")"
                             : "";
    if (nr == 1) {
      vector_loop(r0_begin, r0_end, pragma, body);
    } else {
      vector_loop("0", sym::to_cpp(k_.rsizes.back(), env_), pragma, body);
    }
    for (size_t j = 0; j + 1 < nr; ++j) {
      --indent_;
      line("}");
    }
    close_chunk();
    // Each accumulator's lanes, combined.
    each_row([&] {
      for (const sched::Member* m : reductions) {
        const ir::Buffer& b = prog_.buffers[m->buffer];
        std::string t = ctype(b.body.dtype()), n = b.name + sfx();
        if (is_arg_reduction(b)) {
          line("int64_t acci_" + n + " = coil_varg_result<" + (arg_is_max(b) ? "true" : "false") +
               ">(vacc_" + n + ", vidx_" + n + ");");
          continue;
        }
        if (is_mask_reduction(b)) {
          line("bool acc_" + n + " = " +
               (*b.reduction == ir::ReductionType::Any ? "coil_vany(vacc_" : "coil_vall(vacc_") +
               n + ");");
          continue;
        }
        line(t + " acc_" + n + " = at::vec::vec_reduce_all<" + t + ">([](const " + vec() +
             "& a, const " + vec() + "& b) { return " + *vec_combine_text(*b.reduction, "a", "b") +
             "; }, vacc_" + n + ");");
      }
    });
    vec_.reset();
  } else if (unroll) {
    // Each lane adds a group of rows on its own first, then into its accumulator: a quarter of
    // the accumulator traffic, and four row streams in flight.
    std::string r = "r" + std::to_string(nr - 1), u = std::to_string(kColumnUnroll);
    memo_.emplace_back();
    lane_pieces([&] {
      for (const sched::Member* m : reductions) {
        const ir::Buffer& b = prog_.buffers[m->buffer];
        std::string init = reduction_identity(*b.reduction, b.body.dtype());
        if (lanes_vec_) {
          lane_type(b.body.dtype());
          line(vec() + " part_" + b.name + "(" + init + ");");
          vec_names_.insert("part_" + b.name);
        } else {
          line(ctype(b.body.dtype()) + " part_" + b.name + " = " + init + ";");
        }
      }
      line("for (int64_t " + r + " = " + r + "u; " + r + " < " + r + "u + " + u + "; ++" + r +
           ") {");
      ++indent_;
      memo_.emplace_back();
      std::map<std::string, std::string> saved_available = available_;
      for (const sched::Member* m : reductions) {
        const ir::Buffer& b = prog_.buffers[m->buffer];
        std::string val = value(kernel_body(*m));
        if (lanes_vec_) val = vec_operand(val, b.body.dtype());
        line("part_" + b.name + " = part_" + b.name + " + " + val + ";");
      }
      available_ = saved_available;
      memo_.pop_back();
      --indent_;
      line("}");
      for (const sched::Member* m : reductions)
        accumulate(*m, "part_" + prog_.buffers[m->buffer].name);
    });
    memo_.pop_back();
    --indent_;
    line("}");
    line("for (int64_t " + r + " = " + unroll_main_end + "; " + r + " < " + unroll_end + "; ++" +
         r + ") {");
    ++indent_;
    body();
    for (size_t j = 0; j < nr; ++j) {
      --indent_;
      line("}");
    }
    close_chunk();
  } else {
    body();
    for (size_t j = 0; j < nr; ++j) {
      --indent_;
      line("}");
    }
    close_chunk();
  }
  // Results of the loop: one value per x point.
  lanes(false, "0", "xn", [&] {
    each_row([&] {
      for (const sched::Member* m : reductions) {
        const ir::Buffer& b = prog_.buffers[m->buffer];
        std::string n = b.name + sfx();
        if (lanes_vec_ && is_arg_reduction(b)) {
          column_arg_results(b, *m);
          continue;
        }
        if (lanes_vec_) {
          std::string v = read_lanes("acc_" + n, b.body.dtype());
          if (b.layout.dtype != b.body.dtype()) {
            if (!is_half(b.layout.dtype)) throw NoVectorForm{"a reduction's result is cast"};
            v = "coil_vround<" + c10_half(b.layout.dtype) + ">(" + v + ")";
          }
          std::string name = "tmp" + std::to_string(next_tmp_++);
          line("auto " + name + " = " + v + ";");
          vec_names_.insert(name);
          write_slot(b, name);
          store(b, *m, name);
          continue;
        }
        std::string src = lane(is_arg_reduction(b) ? "acci_" + n : "acc_" + n);
        std::string var = "v_" + n;
        std::string cast = "static_cast<" + ctype(b.layout.dtype) + ">(" + src + ")";
        if (column()) {
          var = lane(var);
          line(var + " = " + cast + ";");
        } else {
          line(ctype(b.layout.dtype) + " " + var + " = " + cast + ";");
        }
        available_[b.name] = var;
        store(b, *m, var);
      }
    });
  });
  column_hoisted_.clear();
}

// One step of a scalar reduction: the accumulator takes the member's value `val`.
void Emitter::accumulate(const sched::Member& m, const std::string& val) {
  const ir::Buffer& b = prog_.buffers[m.buffer];
  DType t = b.body.dtype();
  if (lanes_vec_ && is_arg_reduction(b)) {
    line("coil_vcol_arg_step<" + std::string(arg_is_max(b) ? "true" : "false") + ">(acc_" + b.name +
         " + xi, acci_" + b.name + " + xi, " + vec_operand(val, t) + ", " + arg_position(m) + ", " +
         vec_->count + ");");
    return;
  }
  if (lanes_vec_) {
    // The lanes' accumulators, loaded, combined and stored back (a masked tail's count of them).
    std::string acc = "acc_" + b.name;
    std::string combined = *vec_combine_text(*b.reduction, read_lanes(acc, t), vec_operand(val, t));
    line(combined + ".store(" + acc + " + xi, " + vec_->count + ");");
    return;
  }
  std::string acc = lane("acc_" + b.name);
  switch (*b.reduction) {
    case ir::ReductionType::Sum:
      line(acc + " = " + acc + " + " + val + ";");
      break;
    case ir::ReductionType::Prod:
      line(acc + " = " + acc + " * " + val + ";");
      break;
    case ir::ReductionType::Max:
      line(acc + " = coil_max<" + ctype(t) + ">(" + acc + ", " + val + ");");
      break;
    case ir::ReductionType::Min:
      line(acc + " = coil_min<" + ctype(t) + ">(" + acc + ", " + val + ");");
      break;
    case ir::ReductionType::Any:
      line(acc + " = " + acc + " || " + val + ";");
      break;
    case ir::ReductionType::All:
      line(acc + " = " + acc + " && " + val + ";");
      break;
    case ir::ReductionType::ArgMax:
    case ir::ReductionType::ArgMin: {
      std::string cmp = *b.reduction == ir::ReductionType::ArgMax ? " > " : " < ";
      line("if ((" + val + cmp + acc + ") || (coil_isnan(" + val + ") && !coil_isnan(" + acc +
           "))) {");
      line("  " + acc + " = " + val + ";");
      line("  " + lane("acci_" + b.name) + " = " + arg_position(m) + ";");
      line("}");
      break;
    }
    case ir::ReductionType::LogSumExp:
      throw std::logic_error("cpp codegen: logsumexp is a scan combine, not a reduction");
  }
}

// Vector column mode: an arg-reduction's positions (int64: no vector form) go to their lanes'
// slots and to memory one lane at a time.
void Emitter::column_arg_results(const ir::Buffer& b, const sched::Member& m) {
  std::string slot = "v_" + b.name, x = last_x();
  env_.add_index_var(Expr::symbol("xl"), k_.xsizes.back());
  line("for (int64_t xl = 0; xl < " + vec_->count + "; ++xl) {");
  line("  " + slot + "[xi + xl] = acci_" + b.name + "[xi + xl];");
  if (stored(b.name) && !b.is_scatter()) {
    Expr idx = sym::substitute(b.write_index(), member_map(m));
    idx = sym::substitute(idx, {{Expr::symbol(x), Expr::symbol(x) + Expr::symbol("xl")}});
    line("  " + ptr_.at(b.name) + "[" + index_text(b.name, idx) + "] = " + slot + "[xi + xl];");
  }
  line("}");
  available_[b.name] = lane(slot);
  slots_.insert(b.name);
}

// The row-major position, within its buffer's own reduction ranges, of the element an
// arg-reduction member takes at this step (the first lane's, in vector form).
std::string Emitter::arg_position(const sched::Member& m) {
  const ir::Buffer& b = prog_.buffers[m.buffer];
  Expr pos = 0;
  for (size_t j = 0; j < b.reduction_ranges.size(); ++j) {
    pos = pos * b.reduction_ranges[j] + m.var_map.at(ir::reduction_var(static_cast<int>(j)));
  }
  return sym::to_cpp(sym::simplify(pos, env_), env_);
}

bool Emitter::vector_arg_reduction(const ir::Buffer& b) const {
  if (*vec_->elem != DType::Float32) return false;  // (int32 positions: as many lanes as floats)
  int64_t n = 1;
  for (const Expr& e : b.reduction_ranges) {
    auto v = e.as_int();
    if (!v) return false;
    n *= *v;
    if (n >= (int64_t{1} << 31)) return false;
  }
  return true;
}

int64_t Emitter::chunk_steps(const std::vector<const sched::Member*>& reductions, bool vector,
                             std::vector<const sched::Member*>& chunked) const {
  for (const auto* m : reductions) {
    const ir::Buffer& b = prog_.buffers[m->buffer];
    if (*b.reduction == ir::ReductionType::Sum && graph::is_floating(b.body.dtype()))
      chunked.push_back(m);
  }
  if (chunked.empty()) return 0;
  int64_t inner = 1;
  for (size_t j = 1; j < k_.rsizes.size(); ++j) {
    auto n = k_.rsizes[j].as_int();
    if (!n) return 0;
    inner *= *n;
  }
  // Elements per accumulator per chunk: a vector accumulator's lanes share a chunk's elements.
  int64_t per_chunk = vector ? kSumChunkElements : kSumChunkElements / 8;
  int64_t steps = std::max<int64_t>(1, per_chunk / std::max<int64_t>(inner, 1));
  auto r0 = k_.rsizes[0].as_int();
  if (r0 && *r0 <= steps) return 0;  // one chunk: nothing to gain
  return steps;
}

// Whether a column-mode stage's innermost r loop runs kColumnUnroll rows per pass: every member
// a float sum (a group's partial sum is exact to reassociate as chunked sums are), at least two
// groups of rows known. `x.sum(0)` of 4096x4096 float32 on 2 cores (2026-12-02, a standalone
// kernel): 3.3-3.6 ms one row per pass, 1.7-2.4 four, the same as a row sum of the same bytes.
bool Emitter::column_unroll(const sched::Stage& stage) const {
  if (!column() || k_.rsizes.empty()) return false;
  auto rows = k_.rsizes.back().as_int();
  if (rows && *rows < 2 * kColumnUnroll) return false;
  for (int mi : stage.members) {
    const ir::Buffer& b = prog_.buffers[k_.members[mi].buffer];
    if (!b.is_reduction() || *b.reduction != ir::ReductionType::Sum ||
        !graph::is_floating(b.body.dtype()))
      return false;
  }
  return !scatter();
}

// Row groups (cpp_emitter.h): a row-mode reduction kernel in vector form whose innermost x loop
// is a multiple of kRowGroup, at least two groups, with enough work for memory to matter (any
// work under cpp_vectorize="on"). Its
// loops over the row must all have a vector form (else NoRowGroup: the kernel is rendered again
// one row at a time).
bool Emitter::plan_row_group() {
  rows_ = 1;
  if (row_group_ <= 1 || column() || !vectorize_ || k_.tile > 0 || scatter()) return false;
  if (k_.xsizes.empty() || k_.rsizes.empty() || !k_.has_reduction()) return false;
  auto rows = k_.xsizes.back().as_int();
  if (!rows || *rows % row_group_ != 0 || *rows < 2 * row_group_) return false;
  Expr work = 1;
  for (const Expr& e : k_.xsizes) work = work * e;
  for (const Expr& e : k_.rsizes) work = work * e;
  // (cpp_vectorize="on" renders small kernels in row groups too, as it renders their short
  // loops in vector form: how tests and the fuzzer reach them with small tensors.)
  auto w = work.as_int();
  if (w && *w < kParallelMinElements && min_trip_ > 1) return false;
  rows_ = row_group_;
  return true;
}

void Emitter::set_row(int g) {
  if (rows_ <= 1) return;
  if (g != row_) {
    row_states_[row_].memo = std::move(memo_[row_memo_]);
    row_states_[row_].available = std::move(available_);
    memo_[row_memo_] = std::move(row_states_[g].memo);
    available_ = std::move(row_states_[g].available);
    row_ = g;
  }
  row_rename_ = {{Expr::symbol(last_x()), Expr::symbol(last_x() + "_g" + std::to_string(g))}};
}

void Emitter::each_row(const std::function<void()>& f) {
  if (rows_ <= 1) {
    f();
    return;
  }
  int start = row_;
  for (int g = 0; g < rows_; ++g) {
    set_row(g);
    f();
  }
  set_row(start);
}

bool Emitter::split_columns() const {
  if (!column()) return false;
  size_t nx = k_.xsizes.size();
  Expr work = 1;
  for (size_t i = 0; i < nx; ++i) {
    auto n = k_.xsizes[i].as_int();
    if (!n || (i + 1 < nx && *n != 1) || (i + 1 == nx && *n > k_.column_block)) return false;
    work = work * k_.xsizes[i];
  }
  for (const Expr& e : k_.rsizes) work = work * e;
  if (!work.as_int() || *work.as_int() < kParallelMinElements) return false;
  for (const sched::Member& m : k_.members) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    if (b.is_reduction() && *b.reduction != ir::ReductionType::Sum) return false;
  }
  return !scatter();
}

}  // namespace coil::codegen::cpp
