#include "coil/ir/program.h"

#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>

namespace coil::ir {

Expr index_var(int i) {
  return Expr::symbol("v" + std::to_string(i));
}
Expr reduction_var(int j) {
  return Expr::symbol("u" + std::to_string(j));
}

std::vector<Expr> index_vars(size_t n) {
  std::vector<Expr> out;
  for (size_t i = 0; i < n; ++i) out.push_back(index_var(static_cast<int>(i)));
  return out;
}

std::vector<Expr> reduction_vars(size_t n) {
  std::vector<Expr> out;
  for (size_t i = 0; i < n; ++i) out.push_back(reduction_var(static_cast<int>(i)));
  return out;
}

Expr Layout::index(const std::vector<Expr>& idx) const {
  if (idx.size() != strides.size()) {
    throw std::logic_error("Layout::index: rank " + std::to_string(strides.size()) + " but " +
                           std::to_string(idx.size()) + " indices");
  }
  Expr e = offset;
  for (size_t i = 0; i < idx.size(); ++i) e = e + strides[i] * idx[i];
  return e;
}

Expr Layout::numel() const {
  Expr n = 1;
  for (const Expr& s : sizes) n = n * s;
  return n;
}

std::vector<Expr> Layout::contiguous_strides(const std::vector<Expr>& sizes) {
  std::vector<Expr> strides(sizes.size());
  Expr running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    // A size-1 (or 0) dimension does not advance the stride, matching torch's contiguous strides.
    running = sizes[i].as_int() && *sizes[i].as_int() <= 1 ? running : running * sizes[i];
  }
  return strides;
}

namespace {

bool is_one(const Expr& e) {
  return e.as_int() && *e.as_int() == 1;
}

// Whether `strides` are a permutation of the contiguous strides of `sizes` (size-1 dims free):
// some order of the other dims has each stride equal to the product of the sizes inside it.
// Exact on symbolic expressions: it compares hash-consed expressions, never values.
bool is_dense(const std::vector<Expr>& sizes, const std::vector<Expr>& strides) {
  std::vector<bool> used(sizes.size(), false);
  size_t left = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    used[i] = is_one(sizes[i]);
    left += used[i] ? 0 : 1;
  }
  Expr running = 1;
  while (left > 0) {
    size_t found = sizes.size();
    for (size_t i = sizes.size(); i-- > 0;) {
      if (!used[i] && strides[i] == running) {
        found = i;
        break;
      }
    }
    if (found == sizes.size()) return false;
    used[found] = true;
    running = running * sizes[found];
    --left;
  }
  return true;
}

}  // namespace

std::vector<Expr> Layout::dense_strides_like(const std::vector<Expr>& sizes,
                                             const std::vector<Expr>& like) {
  if (like.size() != sizes.size()) return contiguous_strides(sizes);
  for (const Expr& s : sizes) {
    if (s.as_int() && *s.as_int() == 0) return contiguous_strides(sizes);
  }
  if (is_dense(sizes, like)) return like;
  std::vector<size_t> order;  // outermost first
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!like[i].as_int()) return contiguous_strides(sizes);
    order.push_back(i);
  }
  // Larger strides outside; broadcast (stride-0) dims say nothing and go outermost; ties keep
  // the logical order.
  auto key = [&](size_t i) {
    int64_t s = *like[i].as_int();
    return s == 0 ? INT64_MAX : s;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  std::vector<Expr> out(sizes.size());
  Expr running = 1;
  for (size_t k = order.size(); k-- > 0;) {
    out[order[k]] = running;
    if (!is_one(sizes[order[k]])) running = running * sizes[order[k]];
  }
  return out;
}

std::vector<Expr> Layout::padded_strides(const std::vector<Expr>& sizes,
                                         const std::vector<Expr>& strides, int64_t align,
                                         int64_t wide_align, int64_t wide_from) {
  if (sizes.size() != strides.size()) return strides;
  std::vector<size_t> order;  // innermost first
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!sizes[i].as_int() || !strides[i].as_int()) return strides;
    if (*sizes[i].as_int() == 0) return strides;
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return *strides[a].as_int() < *strides[b].as_int(); });
  auto round_up = [](int64_t v, int64_t m) { return m <= 1 ? v : (v + m - 1) / m * m; };
  std::vector<Expr> out(sizes.size());
  int64_t running = 1;
  bool inner = true;  // no dim of size > 1 placed yet: its stride stays 1
  for (size_t d : order) {
    int64_t size = *sizes[d].as_int();
    if (size == 1) {  // its stride is never used: keep the one given
      out[d] = strides[d];
      continue;
    }
    if (!inner) running = round_up(running, running >= wide_from ? wide_align : align);
    out[d] = running;
    if (size > 1) {
      running *= size;
      inner = false;
    }
  }
  return out;
}

const char* reduction_name(ReductionType t) {
  switch (t) {
    case ReductionType::Sum:
      return "sum";
    case ReductionType::Prod:
      return "prod";
    case ReductionType::Max:
      return "max";
    case ReductionType::Min:
      return "min";
    case ReductionType::ArgMax:
      return "argmax";
    case ReductionType::ArgMin:
      return "argmin";
    case ReductionType::Any:
      return "any";
    case ReductionType::All:
      return "all";
    case ReductionType::LogSumExp:
      return "logsumexp";
  }
  return "?";
}

const char* scatter_mode_name(ScatterMode m) {
  switch (m) {
    case ScatterMode::Store:
      return "store";
    case ScatterMode::Add:
      return "add";
    case ScatterMode::Mul:
      return "mul";
    case ScatterMode::Max:
      return "max";
    case ScatterMode::Min:
      return "min";
  }
  return "?";
}

Expr Buffer::write_index() const {
  if (is_scatter()) return target->index;
  return layout.index(index_vars(ranges.size()));
}

const Buffer& Program::buffer(const std::string& name) const {
  int i = buffer_index(name);
  if (i < 0) throw std::logic_error("Program: no buffer named " + name);
  return buffers[i];
}

Buffer& Program::buffer(const std::string& name) {
  int i = buffer_index(name);
  if (i < 0) throw std::logic_error("Program: no buffer named " + name);
  return buffers[i];
}

int Program::buffer_index(const std::string& name) const {
  auto it = index_.find(name);
  if (it != index_.end() && it->second < static_cast<int>(buffers.size()) &&
      buffers[it->second].name == name) {
    return it->second;
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

void Program::rebuild_index() {
  index_.clear();
  for (size_t i = 0; i < buffers.size(); ++i) index_[buffers[i].name] = static_cast<int>(i);
}

namespace {

std::string exprs_text(const std::vector<Expr>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].str();
  return s + "]";
}

std::string origins_text(const std::set<std::string>& origins) {
  std::string s;
  for (const auto& o : origins) s += (s.empty() ? "" : ", ") + o;
  return s;
}

}  // namespace

std::string Program::to_text() const {
  std::ostringstream out;
  for (const Buffer& b : buffers) {
    out << b.name << ": " << graph::dtype_name(b.layout.dtype) << exprs_text(b.layout.sizes)
        << " strides=" << exprs_text(b.layout.strides);
    if (b.layout.offset != Expr(0)) out << " offset=" << b.layout.offset.str();
    out << (b.layout.fixed ? " fixed" : " flexible");
    switch (b.kind) {
      case Buffer::Kind::Input:
        out << "  (input)\n";
        continue;
      case Buffer::Kind::Extern: {
        const ExternCall& e = externs[b.extern_id];
        out << "  (" << (e.is_fallback ? "fallback " : "extern ") << e.op << " from " << e.origin;
        for (const std::string& m : e.mutates) out << ", writes into " << m;
        out << ")\n";
        continue;
      }
      case Buffer::Kind::Computed:
      case Buffer::Kind::Scatter:
        break;
    }
    out << "  origins: " << origins_text(b.origins) << "\n";
    if (b.is_scatter()) {
      out << "  scatter " << scatter_mode_name(b.scatter_mode) << " into a copy of " << b.base
          << " ranges=" << exprs_text(b.ranges) << "\n";
      std::istringstream body(body_to_text({b.body, b.target}));
      for (std::string line; std::getline(body, line);) out << "    " << line << "\n";
      // body_to_text names nodes tmp<position in topological order>.
      std::vector<Value> order = topo_order({b.body, b.target});
      auto name = [&](Value v) {
        size_t i = std::find(order.begin(), order.end(), v) - order.begin();
        return "tmp" + std::to_string(i);
      };
      out << "    " << scatter_mode_name(b.scatter_mode) << " " << b.name << "[" << name(b.target)
          << "] <- " << name(b.body) << "\n";
      continue;
    }
    if (b.is_scan()) {
      out << "  scan " << reduction_name(*b.scan) << " along dim " << b.scan_dim
          << " ranges=" << exprs_text(b.ranges) << "\n";
    } else if (b.is_reduction()) {
      out << "  reduction " << reduction_name(*b.reduction) << " ranges=" << exprs_text(b.ranges)
          << " reduction_ranges=" << exprs_text(b.reduction_ranges) << "\n";
    } else {
      out << "  pointwise ranges=" << exprs_text(b.ranges) << "\n";
    }
    std::istringstream body(body_to_text({b.body}));
    for (std::string line; std::getline(body, line);) out << "    " << line << "\n";
    out << "    store " << b.name << "[" << b.write_index().str() << "]\n";
  }
  out << "outputs:";
  for (const GraphOutput& o : outputs) {
    if (o.is_none) {
      out << " None";
    } else if (!o.scalar.empty()) {
      out << " " << o.scalar << "(number)";
    } else {
      out << " " << o.ref.buffer << exprs_text(o.ref.sizes);
    }
  }
  out << "\n";
  for (const std::string& why : fallback_reasons)
    out << "fallback (needs a static value): " << why << "\n";
  return out.str();
}

}  // namespace coil::ir
