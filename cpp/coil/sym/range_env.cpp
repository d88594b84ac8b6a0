// sym::RangeEnv and sym::SizeSymbolScope: what is known about symbols (ranges, hints, the
// extents of index variables), and the graph's size symbols that every RangeEnv on a thread falls
// back to while a compile's scope lives (expr.h). The analysis that uses them: simplify.cpp.
//
// Tests: tests/cpp/sym/simplify_test.cpp (RangeEnvStoresRangesHintsExtents, SymSizeScope.*).
#include <stdexcept>
#include <string>

#include "coil/sym/expr.h"

namespace coil::sym {

namespace {
constexpr int64_t kNegInf = Range::kNegInf;
constexpr int64_t kPosInf = Range::kPosInf;

void check_symbol(const char* what, const Expr& e) {
  if (!e.is_symbol()) {
    throw std::invalid_argument(std::string("coil::sym::RangeEnv::") + what +
                                ": expected a symbol, got " + e.str());
  }
}
}  // namespace

void RangeEnv::set_range(const Expr& symbol, Range r) {
  check_symbol("set_range", symbol);
  ranges_[symbol.node()] = r;
}

void RangeEnv::set_hint(const Expr& symbol, int64_t hint) {
  check_symbol("set_hint", symbol);
  hints_[symbol.node()] = hint;
}

void RangeEnv::add_index_var(const Expr& var, const Expr& extent) {
  check_symbol("add_index_var", var);
  Range e = bounds(extent, *this);
  // extent - 1, saturating as interval arithmetic does (kNegInf + 1 is the lowest finite end).
  int64_t hi = e.hi == kPosInf ? kPosInf : e.hi <= kNegInf + 1 ? kNegInf + 1 : e.hi - 1;
  ranges_[var.node()] = Range{0, hi};
  extents_.insert_or_assign(var.node(), extent);
}

namespace {
thread_local const RangeEnv* current_size_symbols = nullptr;
}  // namespace

SizeSymbolScope::SizeSymbolScope(const RangeEnv& symbols) : previous_(current_size_symbols) {
  current_size_symbols = &symbols;
}

SizeSymbolScope::~SizeSymbolScope() {
  current_size_symbols = previous_;
}

const RangeEnv* SizeSymbolScope::current() {
  return current_size_symbols;
}

Range RangeEnv::range_of_symbol(const Expr& symbol) const {
  auto it = ranges_.find(symbol.node());
  if (it != ranges_.end()) return it->second;
  const RangeEnv* sizes = current_size_symbols;
  if (sizes && sizes != this) return sizes->range_of_symbol(symbol);
  return Range{};
}

std::optional<int64_t> RangeEnv::hint_of_symbol(const Expr& symbol) const {
  auto it = hints_.find(symbol.node());
  if (it != hints_.end()) return it->second;
  const RangeEnv* sizes = current_size_symbols;
  if (sizes && sizes != this) return sizes->hint_of_symbol(symbol);
  return std::nullopt;
}

std::optional<Expr> RangeEnv::extent_of_symbol(const Expr& symbol) const {
  auto it = extents_.find(symbol.node());
  if (it == extents_.end()) return std::nullopt;
  return it->second;
}

}  // namespace coil::sym
