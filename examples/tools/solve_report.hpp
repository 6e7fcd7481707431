// remat-solve's reports: the solve at one budget (text and --json) and --info, computed from a
// request and formatted; what they print is docs/chain-format.md's contract.
#pragma once

#include "bandwidth_arg.hpp"
#include "solve_args.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/io/schedule_json.hpp>
#include <remat/op_table.hpp>
#include <remat/solve.hpp>
#include <remat/walk.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::tools {

struct solve_report {
  const io::chain_file* file = nullptr;
  remat::solver solver = remat::solver::optimal;
  size_type slots = default_slots;
  std::size_t coarsen = no_coarsening;  ///< what --coarsen asked for
  std::size_t in_flight = 1;            ///< what --in-flight asked for
  solve_result result;
  replay_result replayed;   ///< the plan replayed on the chain's own sizes (if feasible)
  replay_result store_all;  ///< the store-all schedule replayed
};

inline solve_report compute_report(const io::chain_file& file, const solve_request& req) {
  solve_report rep;
  rep.file = &file;
  rep.solver = req.solvers.empty() ? remat::solver::optimal : req.solvers.front();
  rep.slots = req.slots;
  rep.coarsen = req.coarsen;
  rep.in_flight = req.in_flight;
  // Every hardware thread fills the DP table: the schedule does not depend on their number.
  rep.result = remat::solve(file.chain, req.budget,
                            {.solver = rep.solver,
                             .slots = req.slots,
                             .threads = 0,
                             .coarsen = req.coarsen,
                             .in_flight = req.in_flight});
  if (rep.result.feasible) rep.replayed = simulate(file.chain, rep.result.schedule);
  const auto L = static_cast<std::int32_t>(file.chain.length());
  const std::vector<op> all = remat::detail::store_all_ops(L);
  rep.store_all = simulate(file.chain, std::span<const op>(all));
  return rep;
}

/// The `--json` form: one object, keys in chain-format.md's order, on one line. `makespan` and
/// `peak_memory` are null when no schedule fits; `min_feasible_budget` is null when no budget
/// would do (too few slots).
namespace detail {
// The default solve of a DP solver that fell back on 500 slots: it reports its bounds.
inline bool bounded(const solve_report& rep) {
  const bool dp = info(rep.solver).dp == solver_dp::persistent;
  // (A solve on merged blocks has no bound of its own: its results are the coarse chain's.)
  return dp && rep.slots == auto_slots && rep.result.feasible && !rep.result.exact &&
         rep.result.coarse_length == 0;
}

}  // namespace detail

inline std::string format_json(const solve_report& rep) {
  nlohmann::ordered_json j;
  const solve_result& r = rep.result;
  j["solver"] = std::string(name(rep.solver));
  j["feasible"] = r.feasible;
  j["budget"] = r.budget;
  j["makespan"] = r.feasible ? nlohmann::ordered_json(rep.replayed.makespan) : nullptr;
  j["peak_memory"] = r.feasible ? nlohmann::ordered_json(rep.replayed.peak_memory) : nullptr;
  j["store_all_makespan"] = rep.store_all.makespan;
  j["store_all_memory"] = rep.store_all.peak_memory;
  j["min_feasible_budget"] = r.min_feasible_budget == solve_result::no_budget
                                 ? nlohmann::ordered_json(nullptr)
                                 : nlohmann::ordered_json(r.min_feasible_budget);
  j["ops"] = io::to_json(std::span<const op>(r.schedule.ops));
  // Only where the default solve fell back on slots, after the contract's keys: its bounds.
  if (detail::bounded(rep)) {
    j["exact"] = false;
    j["memory_loss"] = r.memory_loss;
    j["makespan_loss"] = r.makespan_loss;
  }
  // With --coarsen only, after the contract's keys: the blocks solved (0: none were merged).
  if (rep.coarsen != no_coarsening) {
    j["coarse_length"] = r.coarse_length;
    j["largest_block"] = r.largest_block;
  }
  // After the contract's keys: the memory held at the loss (docs/pipelines.md), and with
  // --in-flight the micro-batches the budget was shared with.
  j["retained"] = r.feasible ? nlohmann::ordered_json(rep.replayed.retained) : nullptr;
  if (rep.in_flight > 1) j["in_flight"] = rep.in_flight;
  return j.dump() + '\n';
}

namespace detail {

// A name from the chain file, made safe to print on a terminal.
inline std::string printable(std::string_view s) {
  std::string out(s);
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return out;
}

// Six significant digits, and no exponent below 1e15: 95.4038, 0.25, 1234567.
inline std::string format_time(double t, const std::string& unit) {
  char buf[64];
  const bool large = std::fabs(t) >= 1e6 && std::fabs(t) < 1e15;
  std::snprintf(buf, sizeof buf, large ? "%.0f" : "%.6g", t);
  return unit.empty() ? std::string(buf) : std::string(buf) + " " + unit;
}

inline std::string format_memory(size_type v, const std::string& unit) {
  std::string s = std::to_string(v);
  if (!unit.empty()) s += " " + unit;
  // Byte counts get a readable binary magnitude alongside.
  if ((unit == "bytes" || unit == "B") && v >= 1024) {
    static constexpr const char* names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double scaled = static_cast<double>(v) / 1024;
    std::size_t k = 0;
    while (scaled >= 1024 && k + 1 < std::size(names)) {
      scaled /= 1024;
      ++k;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, " (%.1f %s)", scaled, names[k]);
    s += buf;
  }
  return s;
}

inline std::string percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * part / whole);
  return buf;
}

// `words` joined by spaces into lines of at most `width` characters; the first line starts with
// `first`, the others with as many spaces.
inline std::string wrap(const std::vector<std::string>& words, std::string_view first,
                        std::size_t width) {
  const std::string indent(first.size(), ' ');
  std::string out, line;
  const auto flush = [&] {
    out += (out.empty() ? std::string(first) : indent) + line + '\n';
    line.clear();
  };
  for (const std::string& w : words) {
    if (!line.empty() && first.size() + line.size() + 1 + w.size() > width) flush();
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty() || out.empty()) flush();
  return out;
}

inline constexpr std::size_t line_width = 100;

// The chain has a link to host memory (a bandwidth > 0 in either direction).
inline bool has_transfer(const chain& c) {
  return c.transfer.offload_bandwidth > 0 || c.transfer.prefetch_bandwidth > 0;
}

// A bandwidth in the chain's units, and in GB/s where those are bytes and seconds:
// `25000000 bytes/ms (25 GB/s)`; `none` for 0.
inline std::string format_bandwidth(double rate, const io::chain_file& f) {
  if (!(rate > 0)) return "none";
  std::string text = format_time(rate, "");
  const std::string& mu = f.memory_unit;
  const std::string& tu = f.time_unit;
  if (mu.empty() && tu.empty())
    text += " memory units per time unit";
  else
    text += " " + (mu.empty() ? std::string("units") : printable(mu)) + "/" +
            (tu.empty() ? std::string("time unit") : printable(tu));
  if (const auto bps = bytes_per_second(rate, tu, mu)) {
    char buf[48];
    std::snprintf(buf, sizeof buf, " (%.4g GB/s)", *bps / 1e9);
    text += buf;
  }
  return text;
}

// The chain's transfer rates: one figure when both directions are equal.
inline std::string transfer_text(const io::chain_file& f) {
  const transfer_rates& t = f.chain.transfer;
  if (t.offload_bandwidth == t.prefetch_bandwidth)
    return format_bandwidth(t.offload_bandwidth, f) + " each way";
  return "offload " + format_bandwidth(t.offload_bandwidth, f) + ", prefetch " +
         format_bandwidth(t.prefetch_bandwidth, f);
}

}  // namespace detail

namespace detail {

// The report for a person, part by part: what was asked, the result against storing
// everything, what the schedule recomputes and moves, and its ops.
class report_writer {
 public:
  explicit report_writer(const solve_report& rep)
      : rep_(rep), f_(*rep.file), r_(rep.result), mu_(f_.memory_unit), tu_(f_.time_unit) {}

  std::string write() {
    request();
    if (!r_.feasible) {
      infeasible();
      return out_;
    }
    figures();
    recomputations();
    transfers();
    schedule_ops();
    return out_;
  }

 private:
  static std::string label(std::string_view text) {
    std::string l(text);
    l.resize(11, ' ');
    return l;
  }
  void line(std::string_view key, const std::string& text) { out_ += label(key) + text + '\n'; }
  [[nodiscard]] std::string memory(size_type v) const { return format_memory(v, mu_); }
  [[nodiscard]] std::string time(double t) const { return format_time(t, tu_); }
  [[nodiscard]] std::string stage_label(std::size_t k) const {
    if (k < f_.stage_names.size() && !f_.stage_names[k].empty())
      return printable(f_.stage_names[k]);
    return "stage " + std::to_string(k);
  }

  // The chain, its link, the solver and its sizes, the budget, the coarsening.
  void request() {
    const auto L = f_.chain.length();
    std::string units;
    if (!tu_.empty()) units += "time in " + printable(tu_);
    if (!mu_.empty()) units += (units.empty() ? "" : ", ") + ("memory in " + printable(mu_));
    std::string chain_text = std::to_string(L) + (L == 1 ? " stage" : " stages");
    if (!units.empty()) chain_text += "; " + units;
    line("chain", f_.name.empty() ? chain_text : printable(f_.name) + " (" + chain_text + ")");
    if (has_transfer(f_.chain)) line("transfer", transfer_text(f_));

    std::string solver_text(name(rep_.solver));
    if (r_.unit > 1)
      solver_text += ", " +
                     std::to_string(rep_.slots == auto_slots ? rotor_slots : rep_.slots) +
                     " slots: sizes rounded up to multiples of " + memory(r_.unit);
    else
      solver_text += ", exact sizes";
    if (bounded(rep_)) {
      char bound[160];
      std::snprintf(bound, sizeof bound, " (makespan within %.2g%% of the exact optimum's)",
                    100 * r_.makespan_loss);
      solver_text += bound;
    }
    line("solver", solver_text);
    line("budget", memory(r_.budget));
    if (rep_.coarsen != no_coarsening) coarsening();
  }

  void coarsening() {
    const std::string asked = rep_.coarsen == auto_coarsening
                                  ? std::string("--coarsen auto")
                                  : "--coarsen " + std::to_string(rep_.coarsen);
    if (r_.coarse_length == 0)
      line("coarsened",
           "no: " +
               std::string(rep_.coarsen == auto_coarsening
                               ? std::string(name(rep_.solver)) + " accepts the chain as given"
                               : "the chain has no more stages than that") +
               " (" + asked + ")");
    else
      line("coarsened", std::to_string(f_.chain.length()) + " stages merged into " +
                            std::to_string(r_.coarse_length) + " blocks of up to " +
                            std::to_string(r_.largest_block) + " stages (" + asked +
                            "); ops below on the chain's stages");
  }

  void infeasible() {
    line("result", "no schedule fits the budget");
    if (r_.min_feasible_budget == solve_result::no_budget)
      line("min budget",
           "none with --slots " + std::to_string(rep_.slots) + "; try more slots or --slots exact");
    else
      line("min budget", memory(r_.min_feasible_budget) + " for " +
                             std::string(name(rep_.solver)) +
                             (rep_.solver == remat::solver::store_all
                                  ? std::string()
                                  : "; store-all " + memory(rep_.store_all.peak_memory)));
  }

  // The makespan and peak against store-all's, and the least budget.
  void figures() {
    const double base_time = rep_.store_all.makespan;
    const double makespan = rep_.replayed.makespan;
    std::string time_text = time(makespan) + ", store-all " + time(base_time);
    if (base_time > 0) {
      const double extra = makespan - base_time;
      time_text += " (" + std::string(extra >= 0 ? "+" : "") + percent(extra, base_time) + ")";
    }
    line("makespan", time_text);
    std::string peak_text = memory(rep_.replayed.peak_memory);
    if (r_.budget > 0)
      peak_text += ", " +
                   percent(static_cast<double>(rep_.replayed.peak_memory),
                           static_cast<double>(r_.budget)) +
                   " of the budget";
    peak_text += "; store-all " + memory(rep_.store_all.peak_memory);
    line("peak", peak_text);
    std::string held = memory(rep_.replayed.retained) + " held at the loss";
    if (rep_.in_flight > 1) {
      const size_type need = rep_.replayed.peak_memory +
                             static_cast<size_type>(rep_.in_flight - 1) * rep_.replayed.retained;
      held += "; with " + std::to_string(rep_.in_flight) + " micro-batches in flight, peak + " +
              std::to_string(rep_.in_flight - 1) + " x retained = " + memory(need);
      if (r_.budget > 0)
        held += ", " + percent(static_cast<double>(need), static_cast<double>(r_.budget)) +
                " of the budget";
    }
    line("retained", held);
    if (r_.min_feasible_budget != solve_result::no_budget)
      line("min budget",
           memory(r_.min_feasible_budget) + " for " + std::string(name(rep_.solver)));
  }

  // Every stage runs forward at least once; the other runs are recomputations.
  void recomputations() {
    const auto L = f_.chain.length();
    std::vector<int> forwards(L, 0);
    for (const op& o : r_.schedule.ops)
      if (rule(o.kind).makes == operand::activation_above ||
          rule(o.kind).makes == operand::tape_above)
        ++forwards[static_cast<std::size_t>(o.stage)];
    std::vector<std::string> recomputed;
    int count = 0;
    double spent = 0;
    for (std::size_t k = 0; k < L; ++k) {
      const int extra = std::max(forwards[k] - 1, 0);
      if (extra == 0) continue;
      count += extra;
      spent += extra * f_.chain.stages[k].forward_time;
      recomputed.push_back(stage_label(k) + (extra > 1 ? " x" + std::to_string(extra) : "") +
                           ",");
    }
    if (recomputed.empty()) {
      line("recomputes", "nothing");
      return;
    }
    recomputed.back().pop_back();
    recomputed.insert(recomputed.begin(), std::to_string(count) +
                                              (count == 1 ? " forward" : " forwards") + " (" +
                                              time(spent) + "):");
    out_ += wrap(recomputed, label("recomputes"), line_width);
  }

  // What the schedule moves to host memory and back (docs/offload.md's ops), where it does.
  void transfers() {
    int offloads = 0, prefetches = 0, waits = 0;
    size_type offloaded = 0, prefetched = 0;
    // A tape's bytes are those of the option that recorded it: the walk knows it.
    remat::walk(f_.chain, r_.schedule.ops, [&](const walked_op& w, const auto&) {
      switch (w.rule->cost) {
        case cost_source::offload:
          ++offloads;
          offloaded += w.input_bytes;
          break;
        case cost_source::prefetch:
          ++prefetches;
          prefetched += w.input_bytes;
          break;
        default: waits += w.rule->transfer ? 1 : 0;
      }
    });
    if (offloads + prefetches + waits == 0) return;
    const auto count = [](int n, const char* one, const char* many) {
      return std::to_string(n) + " " + (n == 1 ? one : many);
    };
    line("transfers", count(offloads, "offload", "offloads") + " (" + memory(offloaded) + "), " +
                          count(prefetches, "prefetch", "prefetches") + " (" +
                          memory(prefetched) + "), " + count(waits, "wait", "waits"));
  }

  // The ops, and the stages' names where the chain has them.
  void schedule_ops() {
    const auto L = f_.chain.length();
    line("schedule", std::to_string(r_.schedule.ops.size()) + " ops");
    std::vector<std::string> words;
    words.reserve(r_.schedule.ops.size());
    for (const op& o : r_.schedule.ops) words.push_back(to_string(o));
    out_ += wrap(words, "  ", line_width);
    const bool named = std::any_of(f_.stage_names.begin(), f_.stage_names.end(),
                                   [](const std::string& n) { return !n.empty(); });
    if (!named) return;
    words.clear();
    for (std::size_t k = 0; k < L; ++k)
      words.push_back(std::to_string(k) + " " + stage_label(k) + (k + 1 < L ? "," : ""));
    out_ += wrap(words, label("stages"), line_width);
  }

  const solve_report& rep_;
  const io::chain_file& f_;
  const solve_result& r_;
  const std::string& mu_;
  const std::string& tu_;
  std::string out_;
};

}  // namespace detail

/// The report for a person: what was asked, how the schedule compares with storing everything,
/// what it recomputes, and its ops.
inline std::string format_report(const solve_report& rep) {
  return detail::report_writer(rep).write();
}

/// One transfer beside the compute op it can run in parallel with (docs/offload.md: a transfer
/// issued right after a compute op overlaps it).
struct overlap {
  bool available = false;  ///< the chain offers this direction (its bandwidth is > 0)
  double transfer = 0;     ///< the transfer's time, where available
  double compute = 0;      ///< the compute op's time

  /// The share of the transfer that the compute hides: min(1, compute / transfer); 1 for an
  /// empty tensor.
  [[nodiscard]] double hidden() const { return transfer <= compute ? 1.0 : compute / transfer; }
};

/// What offloading stage k's tensors costs against the compute around them: its input a_k
/// offloaded during F(k) (the forward that reads it) and prefetched during B(k+1) (the backward
/// before B(k), which needs it); its tape t_{k+1} offloaded during F(k+1) (the first op after
/// the forward that records it) and prefetched during B(k+1). For the last stage the loss stands
/// in for stage k+1.
struct stage_transfer {
  size_type input_size = 0;  ///< x[k]
  size_type tape_size = 0;   ///< xb[k+1]
  overlap input_offload, input_prefetch, tape_offload, tape_prefetch;
};

/// The share of all of one kind of transfer that compute hides: the hidden time summed over the
/// stages over the transfer time summed (1 when nothing moves); none where unavailable.
inline std::optional<double> hidden_share(const std::vector<stage_transfer>& stages,
                                          overlap stage_transfer::*which) {
  double hidden = 0, total = 0;
  for (const stage_transfer& s : stages) {
    const overlap& o = s.*which;
    if (!o.available) return std::nullopt;
    hidden += std::min(o.transfer, o.compute);
    total += o.transfer;
  }
  return total > 0 ? hidden / total : 1.0;
}

/// What `--info` reports: the chain's size and the two ends of its time-memory trade-off.
struct info_report {
  const io::chain_file* file = nullptr;
  size_type slots = default_slots;
  replay_result store_all;  ///< the store-all schedule replayed
  /// The least budget of `optimal` with `slots`, and the least persistent peak on exact sizes
  /// (`min-memory`); `solve_result::no_budget` when there is none.
  size_type min_budget = solve_result::no_budget;
  size_type min_budget_exact = solve_result::no_budget;
  /// The most memory one stage needs on its own (`stage_requirement`), and which stage (L: the
  /// loss).
  size_type largest_requirement = 0;
  std::size_t largest_stage = 0;
  /// Per stage, where the chain has a link to host memory: how much of its transfers compute
  /// can hide. Empty without one.
  std::vector<stage_transfer> transfers;
  /// Where the chain has both directions of a link: the least budget of `offload` (with `slots`).
  size_type min_budget_offload = solve_result::no_budget;
  /// With --in-flight K > 1: K, and the least budget of `optimal` with K micro-batches in
  /// flight (exact sizes).
  std::size_t in_flight = 1;
  size_type min_budget_in_flight = solve_result::no_budget;
  /// Where some stage lists options (docs/model.md, "Several options per stage"): how many each
  /// stage has (1 for a stage without a list). Empty otherwise.
  std::vector<std::size_t> options;
};

/// The transfer figures of every stage of `c` (see `stage_transfer`).
inline std::vector<stage_transfer> stage_transfers(const chain& c) {
  const transfer_rates& rates = c.transfer;
  const auto beside = [](size_type size, double bandwidth, double compute) {
    overlap o;
    o.available = bandwidth > 0;
    o.transfer = o.available ? static_cast<double>(size) / bandwidth : 0.0;
    o.compute = compute;
    return o;
  };
  std::vector<stage_transfer> out(c.length());
  for (std::size_t k = 0; k < c.length(); ++k) {
    const bool last = k + 1 == c.length();
    const double next_forward = last ? c.loss_time : c.stages[k + 1].forward_time;
    const double next_backward = last ? c.loss_time : c.stages[k + 1].backward_time;
    stage_transfer& s = out[k];
    s.input_size = k == 0 ? c.input_size : c.stages[k - 1].output_size;
    s.tape_size = c.stages[k].tape_size;
    s.input_offload = beside(s.input_size, rates.offload_bandwidth, c.stages[k].forward_time);
    s.input_prefetch = beside(s.input_size, rates.prefetch_bandwidth, next_backward);
    s.tape_offload = beside(s.tape_size, rates.offload_bandwidth, next_forward);
    s.tape_prefetch = beside(s.tape_size, rates.prefetch_bandwidth, next_backward);
  }
  return out;
}

/// The memory stage `k` needs whatever the schedule: the peak of storing everything on the chain
/// of that stage alone (its input, the stage, a free loss), which is the larger of F_all(k)
/// (input, tape, recording overhead) and B(k) (input, tape, incoming and outgoing gradients,
/// backward overhead), with the option of the stage that needs least; every schedule of the
/// chain runs both with one option and at least that much held. For `k` = L, the loss: its
/// input and its gradient, and its overhead.
inline size_type stage_requirement(const chain& c, std::size_t k) {
  if (k == c.length()) {
    const size_type x = c.stages.back().output_size;
    return x + x + c.loss_overhead;
  }
  chain alone;
  alone.input_size = k == 0 ? c.input_size : c.stages[k - 1].output_size;
  alone.stages = {c.stages[k]};
  std::vector<op> ops = remat::detail::store_all_ops(1);
  size_type least = 0;
  for (std::size_t o = 0; o < option_count(c.stages[k]); ++o) {
    ops.front().option = static_cast<std::uint16_t>(o);
    const size_type peak = simulate(alone, std::span<const op>(ops)).peak_memory;
    if (o == 0 || peak < least) least = peak;
  }
  return least;
}

inline info_report compute_info(const io::chain_file& file, const solve_request& req) {
  info_report rep;
  rep.file = &file;
  rep.slots = req.slots;
  const chain& c = file.chain;
  const std::vector<op> all = remat::detail::store_all_ops(static_cast<std::int32_t>(c.length()));
  rep.store_all = simulate(c, std::span<const op>(all));
  // The least budget does not depend on the budget asked for; 0 builds no table.
  rep.min_budget = solve_optimal(c, 0, {.slots = req.slots}).min_feasible_budget;
  // Min-memory's least budget, from its O(L^3) least-peak DP (the same budget as its frontier's
  // first point, tested, without a second frontier DP).
  rep.min_budget_exact = remat::detail::min_memory_least_peak(c, 0, {}).min_feasible_budget;
  for (std::size_t k = 0; k <= c.length(); ++k) {
    const size_type need = stage_requirement(c, k);
    if (need > rep.largest_requirement || k == 0) {
      rep.largest_requirement = need;
      rep.largest_stage = k;
    }
  }
  if (std::any_of(c.stages.begin(), c.stages.end(),
                  [](const stage& s) { return !s.options.empty(); }))
    for (const stage& s : c.stages) rep.options.push_back(option_count(s));
  if (detail::has_transfer(c)) rep.transfers = stage_transfers(c);
  if (c.transfer.available())
    rep.min_budget_offload = solve_offload(c, 0, {.slots = exact_units}).min_feasible_budget;
  rep.in_flight = req.in_flight;
  if (req.in_flight > 1)
    rep.min_budget_in_flight =
        solve_optimal(c, 0, {.slots = exact_units, .in_flight = req.in_flight}).min_feasible_budget;
  return rep;
}

namespace detail {

inline nlohmann::ordered_json budget_or_null(size_type b) {
  return b == solve_result::no_budget ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(b);
}

inline std::string stage_label(const io::chain_file& f, std::size_t k) {
  if (k == f.chain.length()) return "the loss";
  if (k < f.stage_names.size() && !f.stage_names[k].empty())
    return "stage " + std::to_string(k) + " (" + printable(f.stage_names[k]) + ")";
  return "stage " + std::to_string(k);
}

inline std::string chain_line(const io::chain_file& f) {
  const std::size_t L = f.chain.length();
  std::string units;
  if (!f.time_unit.empty()) units += "time in " + printable(f.time_unit);
  if (!f.memory_unit.empty())
    units += (units.empty() ? "" : ", ") + ("memory in " + printable(f.memory_unit));
  std::string text = std::to_string(L) + (L == 1 ? " stage" : " stages");
  if (!units.empty()) text += "; " + units;
  return f.name.empty() ? text : printable(f.name) + " (" + text + ")";
}

inline std::string slots_text(size_type slots) {
  if (slots == auto_slots) return "--slots auto";
  return slots == exact_units ? std::string("--slots exact") : "--slots " + std::to_string(slots);
}

// The slots of a least budget: the default's is the exact one (its least-memory DP runs on the
// chain's own sizes).
inline std::string least_slots_text(size_type slots) {
  return slots_text(slots == auto_slots ? exact_units : slots);
}

}  // namespace detail

/// `--info --json`: one object on one line.
inline std::string format_info_json(const info_report& rep) {
  const io::chain_file& f = *rep.file;
  nlohmann::ordered_json j;
  j["name"] = f.name;
  j["stages"] = f.chain.length();
  j["input_size"] = f.chain.input_size;
  j["store_all_makespan"] = rep.store_all.makespan;
  j["store_all_memory"] = rep.store_all.peak_memory;
  // The slots of `min_feasible_budget` (the default's least budget is the exact one).
  j["slots"] = rep.slots == exact_units || rep.slots == auto_slots
                   ? nlohmann::ordered_json("exact")
                   : nlohmann::ordered_json(rep.slots);
  j["min_feasible_budget"] = detail::budget_or_null(rep.min_budget);
  j["min_feasible_budget_exact"] = detail::budget_or_null(rep.min_budget_exact);
  j["largest_stage_memory"] = rep.largest_requirement;
  j["largest_stage"] = rep.largest_stage;
  j["store_all_retained"] = rep.store_all.retained;
  if (rep.in_flight > 1) {
    j["in_flight"] = rep.in_flight;
    j["min_feasible_budget_in_flight"] = detail::budget_or_null(rep.min_budget_in_flight);
  }
  // Where some stage lists options only: how many each stage has.
  if (!rep.options.empty()) j["options"] = rep.options;
  // Where the chain has a link to host memory only, after the keys above.
  if (!rep.transfers.empty()) {
    const auto or_null = [](const std::optional<double>& v) {
      return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    };
    const transfer_rates& t = f.chain.transfer;
    nlohmann::ordered_json transfer;
    transfer["offload_bandwidth"] = t.offload_bandwidth;
    transfer["prefetch_bandwidth"] = t.prefetch_bandwidth;
    transfer["input_offload_hidden"] =
        or_null(hidden_share(rep.transfers, &stage_transfer::input_offload));
    transfer["input_prefetch_hidden"] =
        or_null(hidden_share(rep.transfers, &stage_transfer::input_prefetch));
    transfer["tape_offload_hidden"] =
        or_null(hidden_share(rep.transfers, &stage_transfer::tape_offload));
    transfer["tape_prefetch_hidden"] =
        or_null(hidden_share(rep.transfers, &stage_transfer::tape_prefetch));
    transfer["min_feasible_budget_offload"] = detail::budget_or_null(rep.min_budget_offload);
    j["transfer"] = std::move(transfer);
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    for (std::size_t k = 0; k < rep.transfers.size(); ++k) {
      const stage_transfer& s = rep.transfers[k];
      nlohmann::ordered_json js;
      const auto put = [&](const char* key, const overlap& o) {
        js[std::string(key) + "_time"] = o.available ? nlohmann::ordered_json(o.transfer) : nullptr;
        js[std::string(key) + "_hidden"] =
            o.available ? nlohmann::ordered_json(o.hidden()) : nullptr;
      };
      js["stage"] = k;
      js["input_size"] = s.input_size;
      put("input_offload", s.input_offload);
      put("input_prefetch", s.input_prefetch);
      js["tape_size"] = s.tape_size;
      put("tape_offload", s.tape_offload);
      put("tape_prefetch", s.tape_prefetch);
      stages.push_back(std::move(js));
    }
    j["transfer_stages"] = std::move(stages);
  }
  return j.dump() + '\n';
}

/// `--info`'s lines on transfers: the rates, the share of each kind of transfer that compute
/// hides over the whole chain, and a table of the shares per stage.
inline std::string format_transfer_info(const info_report& rep) {
  const io::chain_file& f = *rep.file;
  std::string out;
  const auto line = [&](std::string_view key, const std::string& text) {
    std::string l(key);
    l.resize(15, ' ');
    out += l + text + '\n';
  };
  const auto share = [](const std::optional<double>& v) {
    return v ? detail::percent(*v, 1.0) : std::string("none");
  };
  line("transfer", detail::transfer_text(f));
  const auto& t = rep.transfers;
  line("hidden", "input: offload " + share(hidden_share(t, &stage_transfer::input_offload)) +
                     ", prefetch " + share(hidden_share(t, &stage_transfer::input_prefetch)) +
                     "; tape: offload " + share(hidden_share(t, &stage_transfer::tape_offload)) +
                     ", prefetch " + share(hidden_share(t, &stage_transfer::tape_prefetch)));
  line("", "(the share of each transfer that compute hides: stage k's input a_k offloaded");
  line("", "during F(k), prefetched during B(k+1); its tape t_{k+1} offloaded during F(k+1),");
  line("", "prefetched during B(k+1); the loss in place of stage k+1 for the last stage)");
  if (rep.min_budget_offload != solve_result::no_budget)
    line("min budget", detail::format_memory(rep.min_budget_offload, f.memory_unit) + ", " +
                           detail::percent(static_cast<double>(rep.min_budget_offload),
                                           static_cast<double>(rep.store_all.peak_memory)) +
                           " of store-all, with offloading (offload, exact sizes)");

  std::vector<std::string> labels;
  std::size_t width = std::string_view("stage").size();
  for (std::size_t k = 0; k < t.size(); ++k) {
    std::string label = std::to_string(k);
    if (k < f.stage_names.size() && !f.stage_names[k].empty())
      label += " " + detail::printable(f.stage_names[k]);
    width = std::max(width, label.size());
    labels.push_back(std::move(label));
  }
  const auto row = [&](const std::string& label, const std::string& input, const std::string& a_out,
                       const std::string& a_in, const std::string& tape, const std::string& t_out,
                       const std::string& t_in) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%14s %9s %9s %14s %9s %9s", input.c_str(), a_out.c_str(),
                  a_in.c_str(), tape.c_str(), t_out.c_str(), t_in.c_str());
    std::string l = label;
    l.resize(width, ' ');
    out += l + buf + '\n';
  };
  const auto hidden = [](const overlap& o) {
    return o.available ? detail::percent(o.hidden(), 1.0) : std::string("-");
  };
  row("stage", "input", "offload", "prefetch", "tape", "offload", "prefetch");
  for (std::size_t k = 0; k < t.size(); ++k)
    row(labels[k], std::to_string(t[k].input_size), hidden(t[k].input_offload),
        hidden(t[k].input_prefetch), std::to_string(t[k].tape_size), hidden(t[k].tape_offload),
        hidden(t[k].tape_prefetch));
  return out;
}

/// `--info` for a person.
inline std::string format_info(const info_report& rep) {
  using detail::format_memory;
  const io::chain_file& f = *rep.file;
  const std::string& mu = f.memory_unit;
  const auto share = [&](size_type v) {
    return rep.store_all.peak_memory > 0
               ? ", " +
                     detail::percent(static_cast<double>(v),
                                     static_cast<double>(rep.store_all.peak_memory)) +
                     " of store-all"
               : std::string();
  };
  std::string out;
  const auto line = [&](std::string_view key, const std::string& text) {
    std::string l(key);
    l.resize(15, ' ');
    out += l + text + '\n';
  };
  line("chain", detail::chain_line(f));
  line("input", format_memory(f.chain.input_size, mu));
  line("store-all", "makespan " + detail::format_time(rep.store_all.makespan, f.time_unit) +
                        ", peak " + format_memory(rep.store_all.peak_memory, mu));
  line("", format_memory(rep.store_all.retained, mu) + " held at the loss (what each other " +
               "micro-batch in flight holds)");
  if (rep.min_budget == solve_result::no_budget)
    line("min budget", "none for optimal with " + detail::least_slots_text(rep.slots) +
                           "; try more slots or --slots exact");
  else
    line("min budget", format_memory(rep.min_budget, mu) + share(rep.min_budget) +
                           ", for optimal with " + detail::least_slots_text(rep.slots));
  if (rep.min_budget_exact != solve_result::no_budget)
    line("", format_memory(rep.min_budget_exact, mu) + share(rep.min_budget_exact) +
                 ", on exact sizes (min-memory)");
  if (rep.in_flight > 1)
    line("", (rep.min_budget_in_flight == solve_result::no_budget
                  ? std::string("none")
                  : format_memory(rep.min_budget_in_flight, mu) + share(rep.min_budget_in_flight)) +
                 ", with " + std::to_string(rep.in_flight) +
                 " micro-batches in flight (optimal, exact sizes)");
  line("largest stage", format_memory(rep.largest_requirement, mu) +
                            share(rep.largest_requirement) + ", " +
                            detail::stage_label(f, rep.largest_stage) + " alone");
  line("", "(its forward with tape and its backward: no schedule fits in less)");
  if (!rep.options.empty()) {
    std::size_t total = 0, listing = 0, most = 0;
    std::string counts;
    for (std::size_t k = 0; k < rep.options.size(); ++k) {
      total += rep.options[k];
      if (!f.chain.stages[k].options.empty()) ++listing;
      if (rep.options[k] > rep.options[most]) most = k;
      if (k > 0) counts += ' ';
      counts += std::to_string(rep.options[k]);
    }
    line("options", std::to_string(listing) + " of " + std::to_string(rep.options.size()) +
                        " stages list options, " + std::to_string(total) +
                        " in all; most: " + std::to_string(rep.options[most]) + ", " +
                        detail::stage_label(f, most));
    line("", "per stage: " + counts + " (F_all(k,o) records with option o)");
  }
  if (!rep.transfers.empty()) out += format_transfer_info(rep);
  return out;
}

/// The solvers `--sweep` runs: those asked for, or every solver but `exhaustive` on chains too
/// long for it (then `note` says so).

}  // namespace remat::tools
