// A block's options from its insides (docs/graphs.md, "Options from a block's insides"): which of
// its taped values a recording forward keeps and which its backward recomputes from what was kept
// (each just before the first backward node that reads it: block.hpp's backward_order), each such
// choice costed by the liveness sweep of block.hpp, and the Pareto set of them. The expansion of
// chain schedules (graph_simulate.hpp) runs the same steps; its replay checks these costs.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/graph/block.hpp>
#include <remat/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace remat {

/// What an option of a graph's block leaves out of its tape (docs/graphs.md, "Options from a
/// block's insides"): the values its recording forward frees instead of keeping (`dropped`,
/// ascending), and the nodes its backward re-runs (`recompute`, in graph order: the makers of the
/// dropped values and of whatever those read that the tape does not hold), each just before the
/// first backward node that needs what it makes. Plain autograd drops nothing.
struct block_recompute {
  std::vector<std::size_t> dropped;
  std::vector<std::size_t> recompute;
  friend bool operator==(const block_recompute&, const block_recompute&) = default;
};

}  // namespace remat

namespace remat::detail::graphs {

using drop_plan = block_recompute;

// Per value: no in-place op writes into it and it writes into nothing (its bytes hold it alone
// from its making to its end), so that re-running its maker reproduces what a reader expects.
inline std::vector<char> plain_values(const graph& g, const block_layout& b) {
  std::vector<char> plain(g.values.size(), 0);
  std::vector<char> overwritten(g.values.size(), 0);
  for (std::size_t j = b.first; j < b.end; ++j)
    for (const std::size_t o : g.nodes[j].outputs)
      if (b.root[o] != o) overwritten[b.root[o]] = 1;
  for (std::size_t j = b.first; j < b.end; ++j)
    for (const std::size_t o : g.nodes[j].outputs)
      plain[o] = b.root[o] == o && !overwritten[o] ? 1 : 0;
  return plain;
}

// The node of the block that makes each value (none for the others).
inline std::vector<std::size_t> makers(const graph& g, const block_layout& b) {
  std::vector<std::size_t> maker(g.values.size(), none);
  for (std::size_t j = b.first; j < b.end; ++j)
    for (const std::size_t o : g.nodes[j].outputs) maker[o] = j;
  return maker;
}

// Whether node j may be re-run in a backward: one plain output, no in-place write, no internal
// bytes (those are taped by every option), not the block's last node (its output is always
// kept), and every activation it reads is the block's input or plain.
inline bool rerunnable(const graph& g, const block_layout& b, const std::vector<char>& plain,
                       std::size_t j) {
  const graph_node& node = g.nodes[j];
  if (j + 1 == b.end || node.outputs.size() != 1 || !node.in_place.empty() ||
      node.saved_internal != 0 || !plain[node.outputs.front()])
    return false;
  for (const std::size_t v : node.inputs)
    if (is_activation(g, v) && v != b.input && !plain[v]) return false;
  return true;
}

// The taped values an option may drop: plain, not the block's output, made by a rerunnable node.
inline std::vector<std::size_t> droppable(const graph& g, const block_layout& b,
                                          const std::vector<char>& plain,
                                          const std::vector<std::size_t>& maker) {
  std::vector<std::size_t> out;
  for (std::size_t j = b.first; j < b.end; ++j)
    for (const std::size_t o : g.nodes[j].outputs)
      if (b.taped[o] && o != b.output_root && plain[o] && rerunnable(g, b, plain, maker[o]))
        out.push_back(o);
  return out;
}

// The nodes the backward must re-run to rebuild the values `dropped` marks: their makers, and
// the makers of every value those read that the tape does not hold (kept: taped and not
// dropped); nullopt when one of them cannot be re-run.
inline std::optional<std::vector<std::size_t>> recompute_nodes(
    const graph& g, const block_layout& b, const std::vector<char>& plain,
    const std::vector<std::size_t>& maker, const std::vector<std::size_t>& dropped,
    const std::vector<char>& dropped_mask) {
  std::vector<char> in_set(b.end - b.first, 0);
  std::vector<std::size_t> work;
  auto need = [&](std::size_t v) {
    const std::size_t j = maker[v];
    if (j == none || !rerunnable(g, b, plain, j)) return false;
    if (!in_set[j - b.first]) {
      in_set[j - b.first] = 1;
      work.push_back(j);
    }
    return true;
  };
  for (const std::size_t v : dropped)
    if (!need(v)) return std::nullopt;
  while (!work.empty()) {
    const std::size_t j = work.back();
    work.pop_back();
    for (const std::size_t v : g.nodes[j].inputs) {
      if (!is_activation(g, v) || v == b.input) continue;
      if (b.taped[v] && !dropped_mask[v]) continue;  // kept (plain: its root is itself)
      if (!need(v)) return std::nullopt;
    }
  }
  std::vector<std::size_t> out;
  for (std::size_t j = b.first; j < b.end; ++j)
    if (in_set[j - b.first]) out.push_back(j);
  return out;
}

// The costs of one option of the block whose layout is `b` (everything taped, as plain autograd
// records it): `kept` is `b` with the `dropped` roots untaped (its `tape` reduced), `rerun` the
// nodes its backward re-runs, each just before the first backward node that needs what it makes
// (backward_order).
inline stage_option option_costs(const graph& g, const block_layout& b, const block_layout& kept,
                                 const std::vector<std::size_t>& dropped,
                                 const std::vector<std::size_t>& rerun, double forward_time,
                                 double backward_time) {
  const size_type x_out = g.values[b.output].size;
  stage_option o;
  o.forward_time = forward_time;
  o.backward_time = backward_time;
  for (const std::size_t j : rerun) o.backward_time += g.nodes[j].forward_time;
  o.tape_size = kept.tape;
  const size_type recording = sweep_peak(forward_bytes(g, kept, true), 0);
  o.forward_overhead = std::max<size_type>(0, recording - kept.tape);
  const size_type peak =
      sweep_peak(backward_bytes(g, b, backward_order(g, b, dropped, rerun)), x_out + kept.tape);
  o.backward_overhead = std::max<size_type>(0, peak - x_out - kept.tape);
  return o;
}

// `a` is at least as good as `b` wherever the chain DP looks: no more tape held, no slower
// backward, no higher peak in F_all (tape + overhead) or B (tape + overhead).
inline bool dominates(const stage_option& a, const stage_option& b) {
  return a.tape_size <= b.tape_size && a.backward_time <= b.backward_time &&
         a.tape_size + a.forward_overhead <= b.tape_size + b.forward_overhead &&
         a.tape_size + a.backward_overhead <= b.tape_size + b.backward_overhead;
}

// How a block's options are searched (the public face is remat::block_options_config).
struct option_search {
  std::size_t exact_limit = 16;  // enumerate every subset up to this many droppable values
  std::size_t max_options = 8;   // keep at most this many (plain autograd included)
};

// The droppable values `cands` in the order the inexact search drops them: by bytes freed per
// unit of recompute time when dropped alone, largest first; a value that cannot be dropped alone
// goes last (it may become droppable with others). `mask` is all zero before and after.
inline std::vector<std::pair<double, std::size_t>> greedy_order(
    const graph& g, const block_layout& b, const std::vector<char>& plain,
    const std::vector<std::size_t>& maker, const std::vector<std::size_t>& cands,
    std::vector<char>& mask) {
  std::vector<std::pair<double, std::size_t>> order;
  for (const std::size_t v : cands) {
    mask[v] = 1;
    const std::optional<std::vector<std::size_t>> rerun =
        recompute_nodes(g, b, plain, maker, {v}, mask);
    mask[v] = 0;
    double key = -1;
    if (rerun) {
      double t = 0;
      for (const std::size_t j : *rerun) t += g.nodes[j].forward_time;
      const auto bytes = static_cast<double>(g.values[v].size);
      key = t > 0 ? bytes / t : std::numeric_limits<double>::infinity();
    }
    order.emplace_back(key, v);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  return order;
}

// The front past option 0 by decreasing tape (then increasing backward time), thinned to `keep`
// options: option 0, and keep - 1 of the others at even steps through them (the last included).
inline void thin_front(std::vector<std::pair<stage_option, drop_plan>>& front, std::size_t keep) {
  std::sort(front.begin() + 1, front.end(), [](const auto& x, const auto& y) {
    if (x.first.tape_size != y.first.tape_size) return x.first.tape_size > y.first.tape_size;
    return x.first.backward_time < y.first.backward_time;
  });
  if (front.size() > keep) {
    std::vector<std::pair<stage_option, drop_plan>> thin{front.front()};
    const std::size_t others = front.size() - 1;
    for (std::size_t i = 1; i < keep; ++i) thin.push_back(front[i * others / (keep - 1)]);
    front = std::move(thin);
  }
}

// The block's options: plain autograd first (option 0: keep every taped value, no re-run), then
// the non-dominated choices of values to drop, by increasing tape. Exact (every subset of the
// droppable values) up to `s.exact_limit` of them; beyond, the prefixes of the droppable values
// ordered by bytes freed per unit of recompute time (each alone), largest first. More than
// `s.max_options` non-dominated options are thinned to that many, spread evenly by tape.
inline std::vector<std::pair<stage_option, drop_plan>> block_options(const graph& g,
                                                                     const block_layout& b,
                                                                     const option_search& s) {
  double fw = 0, bw = 0;
  for (std::size_t j = b.first; j < b.end; ++j) {
    fw += g.nodes[j].forward_time;
    bw += g.nodes[j].backward_time;
  }
  const std::vector<char> plain = plain_values(g, b);
  const std::vector<std::size_t> maker = makers(g, b);
  const std::vector<std::size_t> cands = droppable(g, b, plain, maker);
  block_layout kept = b;
  std::vector<char> mask(g.values.size(), 0);
  std::vector<std::pair<stage_option, drop_plan>> front;
  // Costs the choice `dropped` (a subset of cands) and merges it into the front.
  auto consider = [&](const std::vector<std::size_t>& dropped) {
    for (const std::size_t v : dropped) mask[v] = 1;
    std::optional<std::vector<std::size_t>> rerun =
        recompute_nodes(g, b, plain, maker, dropped, mask);
    if (rerun) {
      for (const std::size_t v : dropped) {
        kept.taped[v] = 0;
        kept.tape -= g.values[v].size;
      }
      const stage_option o = option_costs(g, b, kept, dropped, *rerun, fw, bw);
      for (const std::size_t v : dropped) {
        kept.taped[v] = 1;
        kept.tape += g.values[v].size;
      }
      // Plain autograd (the first considered) stays whatever follows.
      const bool beaten = std::any_of(front.begin(), front.end(),
                                      [&](const auto& f) { return dominates(f.first, o); });
      if (!beaten) {
        std::erase_if(front, [&](const auto& f) {
          return !f.second.dropped.empty() && dominates(o, f.first);
        });
        drop_plan p{dropped, std::move(*rerun)};
        std::sort(p.dropped.begin(), p.dropped.end());
        front.emplace_back(o, std::move(p));
      }
    }
    for (const std::size_t v : dropped) mask[v] = 0;
  };
  consider({});
  if (cands.size() <= s.exact_limit) {
    const std::uint64_t subsets = std::uint64_t{1} << cands.size();
    std::vector<std::size_t> dropped;
    for (std::uint64_t m = 1; m < subsets; ++m) {
      dropped.clear();
      for (std::size_t i = 0; i < cands.size(); ++i)
        if ((m >> i) & 1U) dropped.push_back(cands[i]);
      consider(dropped);
    }
  } else {
    std::vector<std::size_t> dropped;
    for (const auto& entry : greedy_order(g, b, plain, maker, cands, mask)) {
      dropped.push_back(entry.second);
      consider(dropped);
    }
  }
  thin_front(front, std::max<std::size_t>(s.max_options, 1));
  return front;
}

}  // namespace remat::detail::graphs
