// Fusion: greedily merges kernels that share memory traffic, when it is legal.
//
// Takes one kernel per computed buffer; merges pairs (producer -> consumer, or siblings reading
// the same buffer) in order of bytes saved. A merge keeps the iteration space of the "host"
// (the kernel with a reduction, else the earlier one) and maps the other kernel's variables into
// it. The mapping is legal when:
//   * the iteration spaces are compatible: equal numel (outer), numel = x*r (the guest runs inside
//     the host's reduction loop), or equal (x, r) numels for two reductions;
//   * the mapping is a bijection of iteration spaces (each guest point computed exactly once);
//   * every buffer passed between the two is read at exactly the index it was written at
//     (so values can stay in registers, and no thread reads another thread's element);
//   * no other kernel or extern call sits on a path between them (no cycle): the paths of the
//     dependencies plan_memory orders by (unit_graph, deps.cpp), which also join calls that share
//     no buffer (ATen fallbacks, random draws and calls with effects keep the graph's order);
//   * no buffer passed between them is read through an indirect (data-dependent) index, and
//     neither kernel is a scatter (its stores land at data-dependent places).
// Siblings need one shared read to line up: at the same index, or (a pointwise guest outside a
// reduction host's loop) at an element the host's loop reads at the same x point.
// Candidate mappings are tried in a fixed order (row-major flattening, matching of index
// coefficients, delinearization of a contiguous index); the first that passes wins.
// Every pair considered gets a verdict with its reason.
#include <algorithm>
#include <functional>
#include <optional>
#include <queue>
#include <sstream>
#include <variant>

#include "coil/sched/schedule.h"

namespace coil::sched {

namespace {

constexpr int kMaxRounds = 10;

Expr product(const std::vector<Expr>& v) {
  Expr p = 1;
  for (const Expr& e : v) p = p * e;
  return p;
}

Expr gxvar(int i) {
  return Expr::symbol("gx" + std::to_string(i));
}
Expr grvar(int j) {
  return Expr::symbol("gr" + std::to_string(j));
}

std::vector<Expr> vars_of(const std::function<Expr(int)>& f, size_t n) {
  std::vector<Expr> out;
  for (size_t i = 0; i < n; ++i) out.push_back(f(static_cast<int>(i)));
  return out;
}

// Row-major decomposition of flat (ranging over product(sizes)) into one index per dim.
std::vector<Expr> delinearize(Expr flat, const std::vector<Expr>& sizes) {
  std::vector<Expr> out(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    out[d] = d == 0 ? flat : sym::mod(flat, sizes[d]);
    flat = sym::floordiv(flat, sizes[d]);
  }
  return out;
}

Expr flatten(const std::vector<Expr>& idx, const std::vector<Expr>& sizes) {
  Expr flat = 0;
  for (size_t d = 0; d < idx.size(); ++d) flat = flat * sizes[d] + idx[d];
  return flat;
}

// If coeffs (over vars with extents) is a permutation of a contiguous layout, returns the vars'
// order from innermost to outermost. Size-1 vars are ignored.
std::optional<std::vector<size_t>> contiguous_order(const std::vector<Expr>& coeffs,
                                                    const std::vector<Expr>& extents) {
  std::vector<size_t> order;
  for (size_t i = 0; i < coeffs.size(); ++i) {
    if (extents[i] == Expr(1)) continue;
    if (!coeffs[i].as_int() || *coeffs[i].as_int() <= 0) return std::nullopt;
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return *coeffs[a].as_int() < *coeffs[b].as_int(); });
  Expr expect = 1;
  for (size_t i : order) {
    if (coeffs[i] != expect) return std::nullopt;
    expect = expect * extents[i];
  }
  return order;
}

struct Anchor {
  std::string buffer;
  Expr guest;  // index over guest vars (gx/gr)
  Expr host;   // index over host vars (x/r)
};

enum class Level { Outer, Inner, Reduction };

struct FuseInput {
  const ir::Program& prog;
  const Kernel& host;
  const Kernel& guest;
  Level level;
  std::vector<Member> guest_members;  // with maps renamed to gx/gr
  sym::RangeEnv env;                  // host ranges
};

// The guest variables and the host variables they must map onto, for the level.
struct Spaces {
  std::vector<Expr> gvars, gsizes, hvars, hsizes;
};

std::vector<Spaces> spaces(const FuseInput& in) {
  std::vector<Expr> hx = vars_of(xvar, in.host.xsizes.size()),
                    hr = vars_of(rvar, in.host.rsizes.size());
  std::vector<Expr> gx = vars_of(gxvar, in.guest.xsizes.size()),
                    gr = vars_of(grvar, in.guest.rsizes.size());
  switch (in.level) {
    case Level::Outer:
      return {{gx, in.guest.xsizes, hx, in.host.xsizes}};
    case Level::Inner: {
      std::vector<Expr> hv = hx, hs = in.host.xsizes;
      hv.insert(hv.end(), hr.begin(), hr.end());
      hs.insert(hs.end(), in.host.rsizes.begin(), in.host.rsizes.end());
      return {{gx, in.guest.xsizes, hv, hs}};
    }
    case Level::Reduction:
      return {{gx, in.guest.xsizes, hx, in.host.xsizes}, {gr, in.guest.rsizes, hr, in.host.rsizes}};
  }
  return {};
}

using Mapping = sym::ExprMap;  // guest var -> host expr

std::optional<Mapping> flat_candidate(const FuseInput& in) {
  Mapping m;
  for (const Spaces& s : spaces(in)) {
    std::vector<Expr> g = delinearize(flatten(s.hvars, s.hsizes), s.gsizes);
    for (size_t i = 0; i < s.gvars.size(); ++i) m[s.gvars[i]] = sym::simplify(g[i], in.env);
  }
  return m;
}

// Matches guest vars to host vars with the same coefficient and extent in an anchor's indices.
std::optional<Mapping> coefficient_candidate(const FuseInput& in, const Anchor& a) {
  Mapping m;
  for (const Spaces& s : spaces(in)) {
    auto ga = sym::as_affine(a.guest, s.gvars);
    auto ha = sym::as_affine(a.host, s.hvars);
    if (!ga || !ha) return std::nullopt;
    std::vector<bool> used(s.hvars.size(), false);
    std::vector<bool> done(s.gvars.size(), false);
    for (size_t i = 0; i < s.gvars.size(); ++i) {
      if (ga->coeffs[i] == Expr(0)) continue;
      for (size_t j = 0; j < s.hvars.size(); ++j) {
        if (used[j] || ha->coeffs[j] != ga->coeffs[i] || s.hsizes[j] != s.gsizes[i]) continue;
        m[s.gvars[i]] = s.hvars[j];
        used[j] = done[i] = true;
        break;
      }
    }
    // Remaining guest vars take remaining host vars of equal extent, in order.
    for (size_t i = 0; i < s.gvars.size(); ++i) {
      if (done[i]) continue;
      if (s.gsizes[i] == Expr(1)) {
        m[s.gvars[i]] = 0;
        continue;
      }
      for (size_t j = 0; j < s.hvars.size() && !done[i]; ++j) {
        if (used[j] || s.hsizes[j] != s.gsizes[i]) continue;
        m[s.gvars[i]] = s.hvars[j];
        used[j] = done[i] = true;
      }
      if (!done[i]) return std::nullopt;
    }
    for (size_t j = 0; j < s.hvars.size(); ++j) {
      if (!used[j] && s.hsizes[j] != Expr(1))
        return std::nullopt;  // would not cover the host space
    }
  }
  return m;
}

// When the guest's index is a contiguous (possibly permuted) layout over its vars, each guest var
// can be read off the host's index by division: g_i = (host - c) / stride_i mod size_i.
std::optional<Mapping> delinearize_candidate(const FuseInput& in, const Anchor& a) {
  if (in.level == Level::Reduction) return std::nullopt;
  const Spaces s = spaces(in)[0];
  auto ga = sym::as_affine(a.guest, s.gvars);
  if (!ga || !contiguous_order(ga->coeffs, s.gsizes)) return std::nullopt;
  Mapping m;
  Expr rel = a.host - ga->constant;
  for (size_t i = 0; i < s.gvars.size(); ++i) {
    m[s.gvars[i]] =
        s.gsizes[i] == Expr(1)
            ? Expr(0)
            : sym::simplify(sym::mod(sym::floordiv(rel, ga->coeffs[i]), s.gsizes[i]), in.env);
  }
  return m;
}

// The mapping must hit every host point exactly once: the guest's row-major flat index, as a
// function of host vars, must be a permuted contiguous layout of the host space.
bool is_bijection(const FuseInput& in, const Mapping& m) {
  for (const Spaces& s : spaces(in)) {
    std::vector<Expr> g;
    for (const Expr& v : s.gvars) g.push_back(m.at(v));
    Expr flat = sym::simplify(flatten(g, s.gsizes), in.env);
    auto aff = sym::as_affine(flat, s.hvars);
    if (!aff || aff->constant != Expr(0) || !contiguous_order(aff->coeffs, s.hsizes)) return false;
    for (size_t j = 0; j < s.hvars.size(); ++j) {
      if (s.hsizes[j] != Expr(1) && aff->coeffs[j] == Expr(0)) return false;
    }
  }
  return true;
}

std::optional<std::string> verify(const FuseInput& in, const Mapping& m,
                                  const std::vector<Anchor>& anchors) {
  for (const Anchor& a : anchors) {
    Expr g = sym::simplify(sym::substitute(a.guest, m), in.env);
    Expr h = sym::simplify(a.host, in.env);
    if (g != h) return "index mismatch on " + a.buffer + " (" + g.str() + " vs " + h.str() + ")";
  }
  return std::nullopt;
}

// Siblings, the guest outside the host's reduction loop (Level::Outer): whether the guest's read
// (mapped) is one the host's loop over r makes at the same x point, the host's index with its r
// variables at constants in their ranges (max.dim's values over 7 rows, unrolled into a
// pointwise body, read the rows its indices' reduction reads: one read of memory, not two).
bool read_in_host_loop(const FuseInput& in, const Mapping& m, const Anchor& a) {
  if (in.level != Level::Outer || in.host.rsizes.empty()) return false;
  std::vector<Expr> rs = vars_of(rvar, in.host.rsizes.size());
  auto aff = sym::as_affine(a.host, rs);
  if (!aff) return false;
  Expr diff = sym::simplify(sym::substitute(a.guest, m) - aff->constant, in.env);
  auto k = diff.as_int();
  if (!k) return false;
  // The r values, largest coefficient first (a row-major walk of the reduced dims).
  std::vector<size_t> order(rs.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::vector<int64_t> coeff(rs.size());
  for (size_t j = 0; j < rs.size(); ++j) {
    auto c = aff->coeffs[j].as_int();
    if (!c || *c <= 0) return false;
    coeff[j] = *c;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return coeff[x] > coeff[y]; });
  int64_t rest = *k;
  for (size_t j : order) {
    auto size = in.host.rsizes[j].as_int();
    if (!size || rest < 0) return false;
    int64_t r = rest / coeff[j];
    if (r >= *size) return false;
    rest -= r * coeff[j];
  }
  return rest == 0;
}

std::vector<Expr> unit_writes_index(const ir::Program& prog, const Member& mem) {
  const ir::Buffer& b = prog.buffers[mem.buffer];
  return {sym::substitute(b.write_index(), mem.var_map)};
}

// Reads of all members, in kernel vars: (buffer, index).
std::vector<Anchor> member_reads(const ir::Program& prog, const std::vector<Member>& members) {
  std::vector<Anchor> out;
  for (const Member& mem : members) {
    for (const Access& a : buffer_reads(prog.buffers[mem.buffer])) {
      out.push_back({a.buffer, sym::substitute(a.index, mem.var_map), Expr(0)});
    }
  }
  return out;
}

std::map<std::string, Expr> member_writes(const ir::Program& prog,
                                          const std::vector<Member>& members) {
  std::map<std::string, Expr> out;
  for (const Member& mem : members)
    out[prog.buffers[mem.buffer].name] = unit_writes_index(prog, mem)[0];
  return out;
}

std::vector<Member> renamed_guest_members(const Kernel& guest) {
  sym::ExprMap rename;
  for (size_t i = 0; i < guest.xsizes.size(); ++i)
    rename[xvar(static_cast<int>(i))] = gxvar(static_cast<int>(i));
  for (size_t j = 0; j < guest.rsizes.size(); ++j)
    rename[rvar(static_cast<int>(j))] = grvar(static_cast<int>(j));
  std::vector<Member> out = guest.members;
  for (Member& m : out) {
    for (auto& [k, v] : m.var_map) v = sym::substitute(v, rename);
  }
  return out;
}

// A buffer one kernel writes and the other reads through an indirect index, if any.
std::optional<std::string> indirect_read_between(const ir::Program& prog, const Kernel& a,
                                                 const Kernel& b) {
  for (const auto* pair : {&a, &b}) {
    const Kernel& reader = *pair;
    const Kernel& writer = pair == &a ? b : a;
    std::set<std::string> written;
    for (const Member& m : writer.members) written.insert(prog.buffers[m.buffer].name);
    for (const Member& m : reader.members) {
      for (const Access& acc : buffer_reads(prog.buffers[m.buffer])) {
        if (acc.indirect && written.count(acc.buffer)) return acc.buffer;
      }
    }
  }
  return std::nullopt;
}

std::string sizes_text(const Kernel& k) {
  std::string s = "[";
  for (size_t i = 0; i < k.xsizes.size(); ++i) s += (i ? ", " : "") + k.xsizes[i].str();
  s += "]";
  if (k.has_reduction()) {
    s += " x r[";
    for (size_t i = 0; i < k.rsizes.size(); ++i) s += (i ? ", " : "") + k.rsizes[i].str();
    s += "]";
  }
  return s;
}

// Two scan kernels over the same loops in the same form, where each reads the other's buffers
// only at the element it writes (cummax's positions read its values): one loop carries both
// running values, the later member reading the earlier's from a register. Any other kernel
// stays apart from a scan: a reader would need the running value at its own position.
//
// A pointwise kernel over the scan's own elements that reads its buffers only where the scan
// writes them (cumsum(x) + 1, a mask of the running max) joins it as an epilogue: each of its
// members is computed at every step of the scan, after the scans, from their registers.
std::variant<Kernel, std::string> fuse_scan_epilogue(const ir::Program& prog, const Kernel& scan,
                                                     const Kernel& pw) {
  std::string alone = "a scan kernel runs alone (its loop over r stores)";
  if (pw.has_reduction() || is_scatter_kernel(prog, pw)) return alone;
  const ir::Buffer& first = prog.buffers[scan.members.front().buffer];
  std::set<std::string> ours, theirs;
  for (const Member& m : scan.members) ours.insert(prog.buffers[m.buffer].name);
  for (const Member& m : pw.members) theirs.insert(prog.buffers[m.buffer].name);
  for (const Member& m : scan.members) {
    for (const Access& acc : buffer_reads(prog.buffers[m.buffer])) {
      if (theirs.count(acc.buffer)) return alone + "; the scan reads " + acc.buffer;
    }
  }
  sym::RangeEnv env = scan.range_env();
  std::map<std::string, Expr> written;
  for (const Member& m : scan.members) {
    const ir::Buffer& buf = prog.buffers[m.buffer];
    written[buf.name] = sym::simplify(sym::substitute(buf.write_index(), m.var_map), env);
  }
  Kernel merged = scan;
  for (const Member& pm : pw.members) {
    const ir::Buffer& b = prog.buffers[pm.buffer];
    if (b.is_reduction() || b.is_scan() || b.ranges != first.ranges)
      return alone + "; " + b.name + " does not run over the scan's elements";
    // The C++ scan loops are scalar: exp, log, tanh there took 10x the time of the vector
    // kernel they had of their own (sigmoid of a column cumsum of 1024x2048: 10.5 ms vs 1.0).
    if (ir::computes_inexactly(b.body))
      return alone + "; " + b.name + " calls math functions, computed in vector form apart";
    Member m;
    m.buffer = pm.buffer;
    m.inner = true;
    m.var_map = scan.members.front().var_map;  // the same dims, the same loops
    for (const Access& acc : buffer_reads(b)) {
      if (!ours.count(acc.buffer)) continue;
      if (acc.whole || acc.indirect ||
          sym::simplify(sym::substitute(acc.index, m.var_map), env) != written.at(acc.buffer))
        return alone + "; " + b.name + " reads " + acc.buffer +
               " at other positions than it is "
               "written";
    }
    merged.members.push_back(m);
  }
  std::sort(merged.members.begin(), merged.members.end(),
            [](const Member& x, const Member& y) { return x.buffer < y.buffer; });
  if (!prog.buffers[merged.members.front().buffer].is_scan())
    return alone + "; a pointwise member would run before the scan";
  merged.decisions.push_back(
      "pointwise readers of the scan computed at each of its steps "
      "(epilogue)");
  return merged;
}

std::variant<Kernel, std::string> fuse_scans(const ir::Program& prog, const Kernel& a,
                                             const Kernel& b) {
  std::string alone = "a scan kernel runs alone (its loop over r stores)";
  if (a.scan != b.scan)
    return a.scan ? fuse_scan_epilogue(prog, a, b) : fuse_scan_epilogue(prog, b, a);
  if (!a.scan || !b.scan || a.scan_column != b.scan_column || a.xsizes != b.xsizes ||
      a.rsizes != b.rsizes)
    return alone;
  sym::RangeEnv env = a.range_env();
  std::map<std::string, Expr> written;  // buffer -> its write index in kernel variables
  for (const Kernel* k : {&a, &b}) {
    for (const Member& m : k->members) {
      const ir::Buffer& buf = prog.buffers[m.buffer];
      written[buf.name] = sym::simplify(sym::substitute(buf.write_index(), m.var_map), env);
    }
  }
  for (const Kernel* k : {&a, &b}) {
    const Kernel& other = k == &a ? b : a;
    std::set<std::string> theirs;
    for (const Member& m : other.members) theirs.insert(prog.buffers[m.buffer].name);
    for (const Member& m : k->members) {
      for (const Access& acc : buffer_reads(prog.buffers[m.buffer])) {
        if (!theirs.count(acc.buffer)) continue;
        if (acc.whole || acc.indirect ||
            sym::simplify(sym::substitute(acc.index, m.var_map), env) != written.at(acc.buffer))
          return alone + "; reads " + acc.buffer + " at other positions than it is written";
      }
    }
  }
  Kernel merged = a;
  merged.members.insert(merged.members.end(), b.members.begin(), b.members.end());
  std::sort(merged.members.begin(), merged.members.end(),
            [](const Member& x, const Member& y) { return x.buffer < y.buffer; });
  return merged;
}

// Tries to merge two kernels; returns the merged kernel or the reason it is not legal.
std::variant<Kernel, std::string> try_fuse(const ir::Program& prog, const Kernel& a,
                                           const Kernel& b) {
  if (is_scatter_kernel(prog, a) || is_scatter_kernel(prog, b))
    return std::string("a scatter kernel runs alone (it stores at data-dependent positions)");
  if (a.scan || b.scan) return fuse_scans(prog, a, b);
  if (auto buf = indirect_read_between(prog, a, b))
    return "reads " + *buf + " through an indirect index (a data-dependent position)";
  const Kernel* host = &a;
  const Kernel* guest = &b;
  if (!a.has_reduction() && b.has_reduction()) std::swap(host, guest);
  Expr hx = product(host->xsizes), hr = product(host->rsizes);
  Expr gx = product(guest->xsizes), gr = product(guest->rsizes);
  Level level;
  if (guest->has_reduction()) {
    if (gx != hx || gr != hr)
      return "reductions over different sizes " + sizes_text(*host) + " vs " + sizes_text(*guest);
    level = Level::Reduction;
  } else if (gx == hx) {
    level = Level::Outer;
  } else if (host->has_reduction() && gx == hx * hr) {
    level = Level::Inner;
  } else {
    return "iteration spaces differ: " + sizes_text(*host) + " vs " + sizes_text(*guest);
  }
  FuseInput in{prog, *host, *guest, level, renamed_guest_members(*guest), host->range_env()};

  // Anchors: every buffer passed between the two, and (for siblings) shared reads.
  std::vector<Anchor> anchors;
  auto host_writes = member_writes(prog, host->members);
  auto guest_writes = member_writes(prog, in.guest_members);
  std::vector<Anchor> host_reads = member_reads(prog, host->members);
  std::vector<Anchor> guest_reads = member_reads(prog, in.guest_members);
  for (const Anchor& r : host_reads) {
    auto it = guest_writes.find(r.buffer);
    if (it != guest_writes.end()) anchors.push_back({r.buffer, it->second, r.guest});
  }
  for (const Anchor& r : guest_reads) {
    auto it = host_writes.find(r.buffer);
    if (it != host_writes.end()) anchors.push_back({r.buffer, r.guest, it->second});
  }
  bool siblings = anchors.empty();
  if (siblings) {
    for (const Anchor& gr_ : guest_reads) {
      for (const Anchor& hr_ : host_reads) {
        if (gr_.buffer == hr_.buffer) anchors.push_back({gr_.buffer, gr_.guest, hr_.guest});
      }
    }
    if (anchors.empty()) return std::string("no shared buffers");
  }

  std::vector<std::optional<Mapping>> candidates = {flat_candidate(in)};
  for (const Anchor& an : anchors) {
    candidates.push_back(coefficient_candidate(in, an));
    candidates.push_back(delinearize_candidate(in, an));
  }
  std::string why = "no mapping of iteration spaces";
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (!candidates[c]) continue;
    const Mapping& m = *candidates[c];
    if (c > 0 && !is_bijection(in, m)) {
      why = "mapping is not a bijection";
      continue;
    }
    std::optional<std::string> bad;
    if (siblings) {
      // Siblings only need one shared read to line up (that is where the saving is).
      bool any = false;
      for (const Anchor& an : anchors) any |= !verify(in, m, {an}) || read_in_host_loop(in, m, an);
      if (!any) bad = "reads of shared buffers differ";
    } else {
      bad = verify(in, m, anchors);
    }
    if (bad) {
      why = *bad;
      continue;
    }
    Kernel merged = *host;
    for (Member mem : in.guest_members) {
      for (auto& [k, v] : mem.var_map) v = sym::simplify(sym::substitute(v, m), in.env);
      if (level == Level::Inner) mem.inner = true;
      merged.members.push_back(mem);
    }
    std::sort(merged.members.begin(), merged.members.end(),
              [](const Member& x, const Member& y) { return x.buffer < y.buffer; });
    return merged;
  }
  return why;
}

std::string members_text(const ir::Program& prog, const Kernel& k) {
  std::string s;
  for (const Member& m : k.members) s += (s.empty() ? "" : ",") + prog.buffers[m.buffer].name;
  return s;
}

}  // namespace

void fuse(const ir::Program& prog, Schedule& s) {
  for (int round = 1; round <= kMaxRounds; ++round) {
    std::vector<Kernel>& ks = s.kernels;
    size_t nk = ks.size();
    // Units are kernels and extern calls, with every dependency the memory plan will order them
    // by (unit_graph): buffers, and the order of calls that share none (fallbacks, effects).
    UnitGraph g = unit_graph(prog, ks);
    size_t nunits = g.nunits;
    const std::vector<int>& owner = g.unit_of;
    const std::vector<std::set<int>>& reads = g.reads;
    std::vector<std::set<int>>& succ = g.succs;
    // The shortest path a -> ... -> b through at least one other unit (the units between), or
    // empty: fused, a and b would run both before and after those units.
    auto indirect_path = [&](int a, int b) -> std::vector<int> {
      std::vector<int> parent(nunits, -2);  // -2: not reached; -1: reached from a directly
      std::queue<int> todo;
      for (int n : succ[a]) {
        if (n == b) continue;
        parent[n] = -1;
        todo.push(n);
      }
      while (!todo.empty()) {
        int u = todo.front();
        todo.pop();
        for (int n : succ[u]) {
          if (n == b) {
            std::vector<int> path;
            for (int v = u; v != -1; v = parent[v]) path.push_back(v);
            std::reverse(path.begin(), path.end());
            return path;
          }
          if (n == a || parent[n] != -2) continue;
          parent[n] = u;
          todo.push(n);
        }
      }
      return {};
    };

    // Candidate pairs with their scores (bytes that stop moving through memory).
    struct Pair {
      int a, b;
      int64_t score;
    };
    std::map<std::pair<int, int>, int64_t> scores;
    auto bytes = [&](int bi) {
      const ir::Layout& l = prog.buffers[bi].layout;
      auto n = l.numel().as_int();
      return (n ? *n : 1) * graph::dtype_itemsize(l.dtype);
    };
    auto add_score = [&](int a, int b, int64_t v) {
      scores[{std::min(a, b), std::max(a, b)}] += v;
    };
    for (size_t k = 0; k < nk; ++k) {
      for (int bi : reads[k]) {
        int o = owner[bi];
        if (o >= 0 && o < static_cast<int>(nk) && o != static_cast<int>(k))
          add_score(o, static_cast<int>(k), bytes(bi));
      }
    }
    std::map<int, std::vector<int>> readers;  // buffer -> kernels reading it
    for (size_t k = 0; k < nk; ++k) {
      for (int bi : reads[k]) readers[bi].push_back(static_cast<int>(k));
    }
    for (const auto& [bi, rs] : readers) {
      for (size_t i = 0; i + 1 < rs.size(); ++i) add_score(rs[i], rs[i + 1], bytes(bi));
    }
    // Each unit's span of buffers in program order (what the final order follows: a fused kernel
    // runs where its first member would have), for the lifetime check below.
    std::vector<std::pair<int, int>> span(nunits, {INT32_MAX, -1});
    for (size_t k = 0; k < nk; ++k) {
      for (const Member& m : ks[k].members)
        span[k] = {std::min(span[k].first, m.buffer), std::max(span[k].second, m.buffer)};
    }
    for (size_t i = 0; i < prog.buffers.size(); ++i) {
      if (prog.buffers[i].kind != ir::Buffer::Kind::Extern) continue;
      int u = static_cast<int>(nk) + prog.buffers[i].extern_id;
      span[u] = {std::min(span[u].first, static_cast<int>(i)),
                 std::max(span[u].second, static_cast<int>(i))};
    }
    // Siblings (neither reads the other) far apart in the order: fused, the later one's results
    // are computed where the earlier one runs and held across all the work between them. That
    // pays only when the reads they share outweigh the results moved: a dozen copies of an
    // attention mask computed up front for a dozen layers read one small tensor once but hold
    // every copy from the first layer on. Returns the reason to refuse, or "".
    auto lifetime_cost = [&](int a, int b, int64_t shared) -> std::string {
      if (succ[a].count(b) || succ[b].count(a)) return "";
      int early = span[a].first <= span[b].first ? a : b, late = early == a ? b : a;
      bool between = false;
      for (size_t u = 0; u < nunits && !between; ++u) {
        int iu = static_cast<int>(u);
        between = iu != a && iu != b && span[u].second >= 0 && span[u].first > span[early].second &&
                  span[u].first < span[late].first;
      }
      if (!between) return "";
      int64_t moved = 0;
      for (const Member& m : ks[late].members) moved += bytes(m.buffer);
      if (moved <= shared) return "";
      return "siblings apart in the order: would hold " + std::to_string(moved) +
             " bytes of results across the work between them to share " + std::to_string(shared) +
             " bytes of reads";
    };
    std::vector<Pair> pairs;
    for (const auto& [key, sc] : scores) pairs.push_back({key.first, key.second, sc});
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const Pair& x, const Pair& y) { return x.score > y.score; });

    std::vector<bool> dead(nk, false);
    std::vector<Kernel> merged_into(nk);
    std::vector<bool> replaced(nk, false);
    bool any = false;
    for (const Pair& p : pairs) {
      if (dead[p.a] || dead[p.b] || replaced[p.a] || replaced[p.b]) continue;
      FusionVerdict v{round, members_text(prog, ks[p.a]), members_text(prog, ks[p.b]), false, ""};
      std::vector<int> path = indirect_path(p.a, p.b);
      if (path.empty()) path = indirect_path(p.b, p.a);
      if (!path.empty()) {
        v.reason = "would create a cycle through";
        for (size_t i = 0; i < path.size(); ++i) {
          int u = path[i];  // (a kernel merged earlier this round goes by its merged members)
          bool merged = u < static_cast<int>(nk) && replaced[u];
          v.reason += (i ? " -> " : " ") + (merged ? "{" + members_text(prog, merged_into[u]) + "}"
                                                   : unit_name(prog, ks, u));
        }
        s.verdicts.push_back(v);
        continue;
      }
      if (std::string why = lifetime_cost(p.a, p.b, p.score); !why.empty()) {
        v.reason = why;
        s.verdicts.push_back(v);
        continue;
      }
      auto result = try_fuse(prog, ks[p.a], ks[p.b]);
      if (auto* why = std::get_if<std::string>(&result)) {
        v.reason = *why;
        s.verdicts.push_back(v);
        continue;
      }
      Kernel k = std::get<Kernel>(std::move(result));
      std::ostringstream reason;
      reason << "shares " << p.score << " bytes";
      v.fused = true;
      v.reason = reason.str();
      s.verdicts.push_back(v);
      k.decisions.push_back("fused {" + v.first + "} + {" + v.second + "}: " + v.reason);
      int keep = std::min(p.a, p.b), drop = std::max(p.a, p.b);
      merged_into[keep] = std::move(k);
      replaced[keep] = true;
      dead[drop] = true;
      any = true;
      // Keep the unit graph current so later cycle checks in this round see the merged unit.
      span[keep] = {std::min(span[keep].first, span[drop].first),
                    std::max(span[keep].second, span[drop].second)};
      span[drop] = {INT32_MAX, -1};
      succ[keep].insert(succ[drop].begin(), succ[drop].end());
      succ[keep].erase(keep);
      succ[keep].erase(drop);
      succ[drop].clear();
      for (auto& out : succ) {
        if (out.erase(drop) && &out != &succ[keep]) out.insert(keep);
      }
    }
    if (!any) break;
    std::vector<Kernel> next;
    for (size_t k = 0; k < nk; ++k) {
      if (dead[k]) continue;
      next.push_back(replaced[k] ? std::move(merged_into[k]) : std::move(ks[k]));
    }
    s.kernels = std::move(next);
  }
}

}  // namespace coil::sched
