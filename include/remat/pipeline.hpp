// Pipeline-parallel training: a chain cut into contiguous stages, one per rank, each rank's
// schedule solved with the micro-batches it has in flight (docs/pipelines.md).
//
//   const std::vector<std::size_t> K = remat::micro_batches_in_flight(
//       remat::pipeline_schedule::one_f_one_b, /*ranks=*/4, /*micro_batches=*/8);
//   remat::pipeline_result p = remat::split_pipeline(c, budget_per_rank, K);
//   for (const remat::pipeline_stage& s : p.stages) run(s.first, s.end, s.result.schedule);
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/pipeline/stage_solves.hpp>
#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/sequential.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

/// The pipeline schedules whose micro-batches in flight follow from the rank alone
/// (torch.distributed.pipelining's `ScheduleGPipe` and `Schedule1F1B`).
enum class pipeline_schedule : std::uint8_t { gpipe, one_f_one_b };

/// `gpipe`, `1f1b`.
constexpr std::string_view name(pipeline_schedule s) noexcept {
  return s == pipeline_schedule::gpipe ? "gpipe" : "1f1b";
}

/// The schedule named `gpipe` or `1f1b` (case as written), or nothing.
constexpr std::optional<pipeline_schedule> parse_pipeline_schedule(std::string_view s) noexcept {
  if (s == "gpipe") return pipeline_schedule::gpipe;
  if (s == "1f1b") return pipeline_schedule::one_f_one_b;
  return std::nullopt;
}

/// Micro-batches in flight on each of `ranks` ranks (rank 0 first) with `micro_batches`
/// micro-batches: GPipe runs every forward before any backward (K = M on every rank); 1F1B lets
/// rank r run P - r forwards ahead (K = min(M, P - r)). Throws `std::invalid_argument` for 0
/// ranks or 0 micro-batches.
inline std::vector<std::size_t> micro_batches_in_flight(pipeline_schedule s, std::size_t ranks,
                                                        std::size_t micro_batches) {
  if (ranks == 0 || micro_batches == 0)
    throw std::invalid_argument("micro_batches_in_flight: ranks (" + std::to_string(ranks) +
                                ") and micro-batches (" + std::to_string(micro_batches) +
                                ") must be >= 1");
  std::vector<std::size_t> k(ranks, micro_batches);
  if (s == pipeline_schedule::one_f_one_b)
    for (std::size_t r = 0; r < ranks; ++r) k[r] = std::min(micro_batches, ranks - r);
  return k;
}

/// The chain a pipeline rank runs for stages [first, end) of `c`: its input is what stage
/// `first - 1` outputs (the chain's input for `first == 0`), and its loss is the chain's where
/// `end` is the chain's length; elsewhere the loss stands for "the output was sent and its
/// gradient arrived" (docs/pipelines.md): no time, and no memory beyond that gradient. The link
/// to host memory is kept. Throws `std::invalid_argument` unless first < end <= c.length().
inline chain stage_chain(const chain& c, std::size_t first, std::size_t end) {
  return detail::cut_stage_chain(c, first, end);
}

/// One rank's part of a pipeline: stages [first, end) of the chain, `in_flight` micro-batches
/// in flight, and its schedule on `stage_chain(c, first, end)` (infeasible where none fits).
struct pipeline_stage {
  std::size_t first = 0;
  std::size_t end = 0;
  std::size_t in_flight = 1;
  solve_result result;

  /// The time of one micro-batch's forward and backward on this rank: the schedule's makespan.
  [[nodiscard]] double time() const noexcept { return result.schedule.makespan; }
  /// The rank's memory with its micro-batches in flight: peak + (K - 1) * retained.
  [[nodiscard]] size_type memory() const noexcept {
    return result.schedule.peak_memory +
           static_cast<size_type>(in_flight - 1) * result.retained;
  }
  friend bool operator==(const pipeline_stage&, const pipeline_stage&) = default;
};

/// A pipeline: every rank's stage and schedule.
struct pipeline_result {
  /// Every rank has a schedule within the budget.
  bool feasible = false;
  /// One per rank, in order; they cover the chain. Feasible or not, `split_pipeline` leaves it
  /// empty when no split fits, and `solve_pipeline` fills it for the split it was given.
  std::vector<pipeline_stage> stages;
  /// The budget of each rank.
  size_type budget = 0;
  /// The slowest rank's time per micro-batch (infinity where infeasible): in a steady pipeline
  /// every rank waits for it, so a step of M micro-batches takes about (M + P - 1) times it.
  double slowest = std::numeric_limits<double>::infinity();
  /// The least budget per rank at which the returned split's ranks fit (the most of their own
  /// least budgets); where `split_pipeline` finds no split, the least at which any split fits.
  /// `solve_result::no_budget` when no budget does.
  size_type min_feasible_budget = 0;
  /// Stage solves run (each (first, end, K) once).
  std::size_t solves = 0;

  /// The first stage of each rank.
  [[nodiscard]] std::vector<std::size_t> starts() const {
    std::vector<std::size_t> s;
    for (const pipeline_stage& p : stages) s.push_back(p.first);
    return s;
  }
};

/// Equal stages per rank: `length` stages over `ranks` ranks, the first `length % ranks` ranks
/// taking one more. Throws `std::invalid_argument` unless 1 <= ranks <= length.
inline std::vector<std::size_t> equal_starts(std::size_t length, std::size_t ranks) {
  if (ranks == 0 || ranks > length)
    throw std::invalid_argument("a pipeline of " + std::to_string(ranks) + " ranks over " +
                                std::to_string(length) +
                                " stages: each rank needs at least one stage");
  std::vector<std::size_t> starts;
  std::size_t at = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    starts.push_back(at);
    at += length / ranks + (r < length % ranks ? 1 : 0);
  }
  return starts;
}

namespace detail {

inline void check_pipeline(std::size_t length, std::span<const std::size_t> in_flight,
                           size_type budget) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  if (in_flight.empty() || in_flight.size() > length)
    throw_solver_error("a pipeline of " + std::to_string(in_flight.size()) + " ranks over " +
                       std::to_string(length) +
                       " stages: give between 1 and as many ranks as stages");
  for (std::size_t r = 0; r < in_flight.size(); ++r)
    if (in_flight[r] == 0 || in_flight[r] > max_in_flight)
      throw_solver_error("rank " + std::to_string(r) + ": micro-batches in flight must be " +
                         "between 1 and " + std::to_string(max_in_flight) + ", not " +
                         std::to_string(in_flight[r]));
}

inline void check_starts(std::size_t length, std::span<const std::size_t> starts,
                         std::size_t ranks) {
  if (starts.size() != ranks)
    throw_solver_error("a split of " + std::to_string(starts.size()) + " stages for " +
                       std::to_string(ranks) + " ranks");
  if (starts.empty() || starts[0] != 0) throw_solver_error("the first rank must start at stage 0");
  for (std::size_t r = 1; r < starts.size(); ++r)
    if (starts[r] <= starts[r - 1] || starts[r] >= length)
      throw_solver_error("rank " + std::to_string(r) + " starts at stage " +
                         std::to_string(starts[r]) +
                         ": starts must increase and stay below the chain's length (" +
                         std::to_string(length) + ")");
}

inline std::size_t end_of(std::span<const std::size_t> starts, std::size_t r,
                          std::size_t length) {
  return r + 1 < starts.size() ? starts[r + 1] : length;
}

// The result of the split `starts` from the ranks' results.
template <class StageResult>
pipeline_result assemble(std::span<const std::size_t> starts, std::span<const std::size_t> in_flight,
                         std::size_t length, size_type budget, StageResult&& result_of) {
  pipeline_result p;
  p.budget = budget;
  p.feasible = true;
  p.slowest = 0;
  p.min_feasible_budget = 0;
  for (std::size_t r = 0; r < starts.size(); ++r) {
    pipeline_stage s{starts[r], end_of(starts, r, length), in_flight[r],
                     result_of(starts[r], end_of(starts, r, length), in_flight[r])};
    p.feasible = p.feasible && s.result.feasible;
    p.slowest = std::max(p.slowest, s.time());
    const size_type need = s.result.min_feasible_budget;
    p.min_feasible_budget = need == solve_result::no_budget || p.min_feasible_budget ==
                                                                   solve_result::no_budget
                                ? solve_result::no_budget
                                : std::max(p.min_feasible_budget, need);
    p.stages.push_back(std::move(s));
  }
  if (!p.feasible) p.slowest = std::numeric_limits<double>::infinity();
  return p;
}

// The DP over contiguous splits of `length` stages into `in_flight.size()` ranks (each at least
// one stage): cell (r, j) is the best value of ranks 0..r covering stages [0, j), and rank r over
// [i, j) extends the best of (r - 1, i) to `extend(before, i, j, K, cell)` (infinity: not taken;
// `before` is 0 for rank 0). `stop(i, j, cell)` says that no earlier i can improve the cell (its
// condition must hold for every smaller i once it holds). A candidate replaces the cell only if
// smaller: ties keep the first found, the last rank shortest. Returns the starts of the best
// split if its value is below `below`.
template <class Extend, class Stop>
std::optional<std::vector<std::size_t>> best_split(std::size_t length,
                                                   std::span<const std::size_t> in_flight,
                                                   double below, Extend&& extend, Stop&& stop) {
  const std::size_t P = in_flight.size();
  constexpr double none = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(P, std::vector<double>(length + 1, none));
  std::vector<std::vector<std::size_t>> from(P, std::vector<std::size_t>(length + 1, 0));
  for (std::size_t r = 0; r < P; ++r) {
    const std::size_t hi = r + 1 == P ? length : length - (P - 1 - r);
    for (std::size_t j = r + 1 == P ? length : r + 1; j <= hi; ++j) {
      double& cell = best[r][j];
      for (std::size_t i = r == 0 ? 1 : j; i-- > (r == 0 ? 0 : r);) {
        const double before = r == 0 ? 0.0 : best[r - 1][i];
        if (!(before < none)) continue;
        if (stop(i, j, cell)) break;
        const double v = extend(before, i, j, in_flight[r], cell);
        if (v < cell) {
          cell = v;
          from[r][j] = i;
        }
      }
    }
  }
  if (!(best[P - 1][length] < below)) return std::nullopt;
  std::vector<std::size_t> starts(P);
  for (std::size_t r = P, j = length; r-- > 0;) {
    starts[r] = from[r][j];
    j = starts[r];
  }
  return starts;
}

// The least, over contiguous splits, of the most any rank's `value(first, end, K)` is;
// `floor(first, end)` is at most `value` and grows as a stage grows (it prunes). Values at or
// above `above` are not searched. Nothing where no split has a value below `above`.
template <class Value, class Floor>
std::optional<std::vector<std::size_t>> least_bottleneck(std::size_t length,
                                                         std::span<const std::size_t> in_flight,
                                                         double above, Value&& value,
                                                         Floor&& floor) {
  return best_split(
      length, in_flight, above,
      [&](double before, std::size_t i, std::size_t j, std::size_t K, double cell) {
        if (before >= std::min(cell, above)) return std::numeric_limits<double>::infinity();
        return std::max(before, value(i, j, K));
      },
      [&](std::size_t i, std::size_t j, double cell) {
        return floor(i, j) >= std::min(cell, above);
      });
}

// Among the splits whose every rank's `value(first, end, K)` is at most `most`, the one with the
// least sum of values; `floor` as in `least_bottleneck`. Nothing where no split keeps `most`.
template <class Value, class Floor>
std::optional<std::vector<std::size_t>> least_sum_within(std::size_t length,
                                                         std::span<const std::size_t> in_flight,
                                                         double most, Value&& value,
                                                         Floor&& floor) {
  return best_split(
      length, in_flight, std::numeric_limits<double>::infinity(),
      [&](double before, std::size_t i, std::size_t j, std::size_t K, double) {
        const double v = value(i, j, K);
        return v > most ? std::numeric_limits<double>::infinity() : before + v;
      },
      [&](std::size_t i, std::size_t j, double) { return floor(i, j) > most; });
}

}  // namespace detail

/// Each rank's schedule for the split `starts` (the first stage of each rank; `starts[0] == 0`,
/// increasing), rank r solved with `in_flight[r]` micro-batches in flight by `options` (its
/// `in_flight` is replaced), on its own chain (`stage_chain`) at `budget` per rank.
template <chain_like C>
pipeline_result solve_pipeline(const C& chain_in, size_type budget,
                               std::span<const std::size_t> in_flight,
                               std::span<const std::size_t> starts,
                               const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  detail::check_pipeline(c.length(), in_flight, budget);
  detail::check_starts(c.length(), starts, in_flight.size());
  detail::stage_solves solves(c, budget, options);
  pipeline_result p = detail::assemble(starts, in_flight, c.length(), budget,
                                       [&](std::size_t i, std::size_t j, std::size_t k) {
                                         return solves.at(i, j, k);
                                       });
  p.solves = solves.count();
  return p;
}

/// The split and schedules that make the slowest rank fastest: over every contiguous split of
/// the chain into `in_flight.size()` ranks (each at least one stage), each rank solved as in
/// `solve_pipeline`, the least time of the slowest rank, exactly (for the schedules `options`'
/// solver returns). Each (first, end, K) is solved once; stages whose least possible time (one
/// recording forward and one backward per stage) cannot beat the best split found are not
/// solved. Among the splits as fast, the one whose ranks' times sum least (the least work in
/// all, and the shortest fill and drain of the pipeline); ties keep the equal split, then the
/// split found first (the last rank shortest). Where no split fits,
/// `feasible` is false, `stages` empty, and `min_feasible_budget` the least budget per rank at
/// which one does.
template <chain_like C>
pipeline_result split_pipeline(const C& chain_in, size_type budget,
                               std::span<const std::size_t> in_flight,
                               const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  const std::size_t L = c.length();
  detail::check_pipeline(L, in_flight, budget);
  detail::stage_solves solves(c, budget, options);
  const detail::makespan_floor floor(c);
  auto time_of = [&](std::size_t i, std::size_t j, std::size_t k) {
    const solve_result& r = solves.at(i, j, k);
    return r.feasible ? r.schedule.makespan : std::numeric_limits<double>::infinity();
  };
  auto solve_split = [&](const std::vector<std::size_t>& starts) {
    return detail::assemble(starts, in_flight, L, budget,
                            [&](std::size_t i, std::size_t j, std::size_t k) {
                              return solves.at(i, j, k);
                            });
  };
  // The equal split first: its time bounds the search.
  pipeline_result p = solve_split(equal_starts(L, in_flight.size()));
  const double above = p.feasible ? p.slowest : std::numeric_limits<double>::infinity();
  if (auto better = detail::least_bottleneck(L, in_flight, above, time_of, floor))
    p = solve_split(*better);
  if (p.feasible) {
    auto total = [](const pipeline_result& q) {
      double t = 0;
      for (const pipeline_stage& s : q.stages) t += s.time();
      return t;
    };
    if (auto fewer = detail::least_sum_within(L, in_flight, p.slowest, time_of, floor)) {
      pipeline_result q = solve_split(*fewer);
      if (total(q) < total(p)) p = std::move(q);
    }
  }
  if (!p.feasible) {
    // The least budget per rank: the same search over each stage's least budget.
    detail::stage_solves least(c, 0, options);
    auto need = [&](std::size_t i, std::size_t j, std::size_t k) {
      const size_type b = least.at(i, j, k).min_feasible_budget;
      return b == solve_result::no_budget ? std::numeric_limits<double>::infinity()
                                          : static_cast<double>(b);
    };
    auto no_floor = [](std::size_t, std::size_t) { return 0.0; };
    const auto s = detail::least_bottleneck(L, in_flight, std::numeric_limits<double>::infinity(),
                                            need, no_floor);
    p = pipeline_result{};
    p.budget = budget;
    p.min_feasible_budget = solve_result::no_budget;
    if (s) {
      p.min_feasible_budget = 0;
      for (std::size_t r = 0; r < s->size(); ++r)
        p.min_feasible_budget = std::max(
            p.min_feasible_budget,
            least.at((*s)[r], detail::end_of(*s, r, L), in_flight[r]).min_feasible_budget);
    }
    p.solves = solves.count() + least.count();
    return p;
  }
  p.solves = solves.count();
  return p;
}

/// The split `starts` with every stage but each rank's last checkpointed (its input kept, the
/// stage recomputed in the backward: `torch.utils.checkpoint` around every block, as torchtitan's
/// and Megatron's full recomputation do; a rank's last stage keeps its tape, as
/// `checkpoint_sequential` does): each rank's schedule judged with its `in_flight[r]`. A rank
/// whose memory passes the budget is infeasible, with that memory as its
/// `min_feasible_budget`; the schedules are kept either way.
template <chain_like C>
pipeline_result checkpoint_every_stage(const C& chain_in, size_type budget,
                                       std::span<const std::size_t> in_flight,
                                       std::span<const std::size_t> starts) {
  const chain c = to_chain(chain_in);
  detail::check_pipeline(c.length(), in_flight, budget);
  detail::check_starts(c.length(), starts, in_flight.size());
  pipeline_result p = detail::assemble(
      starts, in_flight, c.length(), budget, [&](std::size_t i, std::size_t j, std::size_t k) {
        const chain s = stage_chain(c, i, j);
        const auto n = static_cast<std::int32_t>(s.length());
        solve_result r;
        r.schedule.ops = detail::sequential_ops(n, n);  // one segment per stage
        const replay_result rr = simulate(s, r.schedule);
        r.schedule.makespan = rr.makespan;
        r.schedule.peak_memory = rr.peak_memory;
        r.retained = rr.retained;
        r.budget = budget;
        r.min_feasible_budget = rr.peak_memory + static_cast<size_type>(k - 1) * rr.retained;
        r.feasible = r.min_feasible_budget <= budget;
        return r;
      });
  p.solves = 0;
  if (!p.feasible) p.slowest = std::numeric_limits<double>::infinity();
  return p;
}

}  // namespace remat
