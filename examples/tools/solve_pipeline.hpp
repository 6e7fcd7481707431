// remat-solve --pipeline P: the chain cut into P ranks (remat/pipeline.hpp), each rank's schedule
// solved with its micro-batches in flight, beside the equal split (with remat per rank, and with
// every stage checkpointed); text and --json (docs/cli.md).
#pragma once

#include "solve_args.hpp"
#include "solve_report.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace remat::tools {

struct pipeline_report {
  const io::chain_file* file = nullptr;
  remat::solver solver = remat::solver::optimal;
  pipeline_schedule schedule = pipeline_schedule::one_f_one_b;
  std::size_t micro_batches = 0;
  std::vector<std::size_t> in_flight;
  bool given = false;             ///< the ranks' K as given (--in-flight K0,K1,...)
  pipeline_result split;          ///< remat's split
  pipeline_result equal;          ///< equal stages per rank, each solved
  pipeline_result checkpointed;   ///< equal stages per rank, every stage checkpointed
};

inline pipeline_report compute_pipeline(const io::chain_file& file, const solve_request& req) {
  pipeline_report rep;
  rep.file = &file;
  rep.solver = req.solvers.empty() ? remat::solver::optimal : req.solvers.front();
  rep.schedule = req.schedule;
  rep.micro_batches = req.micro_batches;
  rep.given = !req.rank_in_flight.empty();
  rep.in_flight = rep.given ? req.rank_in_flight
                            : micro_batches_in_flight(req.schedule, req.pipeline,
                                                      req.micro_batches);
  const solve_options options{
      .solver = rep.solver, .slots = req.slots, .threads = 0, .coarsen = req.coarsen};
  rep.split = split_pipeline(file.chain, req.budget, rep.in_flight, options);
  const std::vector<std::size_t> equal = equal_starts(file.chain.length(), req.pipeline);
  rep.equal = solve_pipeline(file.chain, req.budget, rep.in_flight, equal, options);
  rep.checkpointed = checkpoint_every_stage(file.chain, req.budget, rep.in_flight, equal);
  return rep;
}

namespace detail {

inline nlohmann::ordered_json time_or_null(const pipeline_result& p) {
  return p.feasible ? nlohmann::ordered_json(p.slowest) : nlohmann::ordered_json(nullptr);
}

inline nlohmann::ordered_json split_json(const pipeline_result& p) {
  nlohmann::ordered_json j;
  j["starts"] = p.starts();
  j["feasible"] = p.feasible;
  j["slowest"] = time_or_null(p);
  j["min_feasible_budget"] = budget_or_null(p.min_feasible_budget);
  return j;
}

inline std::string stage_span(const io::chain_file& f, const pipeline_stage& s) {
  auto named = [&](std::size_t k) {
    return k < f.stage_names.size() && !f.stage_names[k].empty() ? printable(f.stage_names[k])
                                                                   : std::to_string(k);
  };
  std::string text = std::to_string(s.first);
  if (s.end - s.first > 1) text += "-" + std::to_string(s.end - 1);
  text += " (" + named(s.first);
  if (s.end - s.first > 1) text += ".." + named(s.end - 1);
  return text + ")";
}

inline std::string split_line(const pipeline_result& p, const std::string& time_unit,
                              const std::string& memory_unit) {
  std::string sizes;
  for (const pipeline_stage& s : p.stages) {
    if (!sizes.empty()) sizes += '+';
    sizes += std::to_string(s.end - s.first);
  }
  if (p.feasible)
    return sizes + ": slowest " + format_time(p.slowest, time_unit);
  return sizes + ": does not fit (needs " + format_memory(p.min_feasible_budget, memory_unit) +
         " per rank)";
}

}  // namespace detail

/// The --json form: one object on one line; each rank's ops are on its own chain (stage k of a
/// rank is stage first + k of the file's chain).
inline std::string format_pipeline_json(const pipeline_report& rep) {
  nlohmann::ordered_json j;
  const pipeline_result& p = rep.split;
  j["solver"] = std::string(name(rep.solver));
  j["pipeline"] = rep.in_flight.size();
  j["schedule"] = rep.given ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json(std::string(name(rep.schedule)));
  j["micro_batches"] = rep.micro_batches == 0 ? nlohmann::ordered_json(nullptr)
                                              : nlohmann::ordered_json(rep.micro_batches);
  j["in_flight"] = rep.in_flight;
  j["feasible"] = p.feasible;
  j["budget"] = p.budget;
  j["slowest"] = detail::time_or_null(p);
  j["min_feasible_budget"] = detail::budget_or_null(p.min_feasible_budget);
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const pipeline_stage& s : p.stages) {
    nlohmann::ordered_json r;
    r["first"] = s.first;
    r["end"] = s.end;
    r["in_flight"] = s.in_flight;
    r["makespan"] = s.time();
    r["peak_memory"] = s.result.schedule.peak_memory;
    r["retained"] = s.result.retained;
    r["memory"] = s.memory();
    r["ops"] = io::to_json(std::span<const op>(s.result.schedule.ops));
    ranks.push_back(std::move(r));
  }
  j["ranks"] = std::move(ranks);
  j["equal_split"] = detail::split_json(rep.equal);
  j["checkpoint_every_stage"] = detail::split_json(rep.checkpointed);
  return j.dump() + '\n';
}

/// The report for a person: the pipeline, each rank's stages, K, time and memory, the slowest
/// rank, the equal split beside it, and each rank's ops.
inline std::string format_pipeline(const pipeline_report& rep) {
  const io::chain_file& f = *rep.file;
  const std::string& mu = f.memory_unit;
  const std::string& tu = f.time_unit;
  const pipeline_result& p = rep.split;
  std::string out;
  auto line = [&](std::string_view key, const std::string& text) {
    std::string l(key);
    l.resize(11, ' ');
    out += l + text + '\n';
  };
  std::string ks;
  for (const std::size_t k : rep.in_flight) {
    if (!ks.empty()) ks += ", ";
    ks += std::to_string(k);
  }
  line("chain", detail::chain_line(f));
  std::string how = rep.given ? std::string("K as given") : std::string(name(rep.schedule));
  if (rep.micro_batches > 0) how += ", " + std::to_string(rep.micro_batches) + " micro-batches";
  line("pipeline", std::to_string(rep.in_flight.size()) + " ranks, " + how + ": " + ks +
                       " in flight, rank 0 first");
  line("solver", std::string(name(rep.solver)) + " on each rank's stages");
  line("budget", detail::format_memory(p.budget, mu) + " per rank");
  if (!p.feasible) {
    line("result", p.min_feasible_budget == solve_result::no_budget
                       ? "no split fits at any budget"
                       : "no split fits; the least budget per rank is " +
                             detail::format_memory(p.min_feasible_budget, mu));
    return out;
  }
  for (std::size_t r = 0; r < p.stages.size(); ++r) {
    const pipeline_stage& s = p.stages[r];
    line("rank " + std::to_string(r),
         "stages " + detail::stage_span(f, s) + ", " + std::to_string(s.in_flight) +
             " in flight: " + detail::format_time(s.time(), tu) + " per micro-batch");
    line("", "memory " + detail::format_memory(s.memory(), mu) + " = peak " +
                 std::to_string(s.result.schedule.peak_memory) + " + " +
                 std::to_string(s.in_flight - 1) + " x retained " +
                 std::to_string(s.result.retained));
  }
  std::string slowest = detail::format_time(p.slowest, tu) + " per micro-batch";
  if (rep.micro_batches > 0)
    slowest += "; a step of " + std::to_string(rep.micro_batches) +
               " takes about (M + P - 1) x that = " +
               detail::format_time(p.slowest * static_cast<double>(rep.micro_batches +
                                                                   rep.in_flight.size() - 1),
                                   tu);
  line("slowest", slowest);
  line("equal", detail::split_line(rep.equal, tu, mu) + " (remat on each rank)");
  line("", detail::split_line(rep.checkpointed, tu, mu) + " (every stage checkpointed)");
  line("ops", "each rank's on its own stages, numbered from 0 there:");
  for (std::size_t r = 0; r < p.stages.size(); ++r) {
    std::vector<std::string> words;
    for (const op& o : p.stages[r].result.schedule.ops) words.push_back(to_string(o));
    std::string key = "ops " + std::to_string(r);
    key.resize(11, ' ');
    out += detail::wrap(words, key, detail::line_width);
  }
  return out;
}

}  // namespace remat::tools
