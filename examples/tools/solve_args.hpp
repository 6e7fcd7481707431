// remat-solve's command line: the request it asks for, and its parser (usage errors name the
// option and what to change). The contract is docs/chain-format.md and docs/cli.md.
#pragma once

#include "bandwidth_arg.hpp"

#include <remat/io/size.hpp>
#include <remat/pipeline.hpp>
#include <remat/solve.hpp>

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

/// A command line that does not make sense; the message says what to change.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class command : std::uint8_t { solve, sweep, info, frontier, help };

/// What the command line asks for.
struct solve_request {
  command what = command::solve;
  std::string chain_path;
  size_type budget = 0;                 ///< --budget, in the chain's memory units
  std::vector<remat::solver> solvers;   ///< --solver (a list only for --sweep)
  size_type slots = default_slots;      ///< --slots N, exact_units (exact), auto_slots (auto)
  bool json = false;                    ///< --json
  std::optional<std::int64_t> points;   ///< --points N (sweep)
  std::optional<std::string> csv;       ///< --csv FILE (sweep)
  std::optional<std::string> plot;      ///< --plot FILE.svg (sweep)
  std::size_t coarsen = no_coarsening;  ///< --coarsen N, or auto_coarsening for --coarsen auto
  /// --bandwidth: the chain's transfer rates instead of the file's (set once the file is read,
  /// since a rate per second depends on its units)
  std::optional<bandwidth_arg> bandwidth;
  /// --block-options: a graph's blocks also get options that recompute some of their saved
  /// values in their backward (docs/graphs.md)
  bool block_options = false;
  /// --in-flight K: micro-batches in flight (docs/pipelines.md); schedules keep
  /// peak + (K - 1) * retained <= budget
  std::size_t in_flight = 1;
  /// --pipeline P: cut the chain into P ranks (0: no pipeline), under --schedule with
  /// --micro-batches M (default 2P) micro-batches (docs/pipelines.md)
  std::size_t pipeline = 0;
  pipeline_schedule schedule = pipeline_schedule::one_f_one_b;
  std::size_t micro_batches = 0;  ///< 0: not given with --in-flight K0,K1,...
  /// --pipeline P --in-flight K0,K1,...: each rank's K as given (instead of --schedule's)
  std::vector<std::size_t> rank_in_flight;
};

inline std::string usage_text() {
  // The solver list grows with the library: wrap it under its option's description.
  std::vector<std::string> words;
  for (const remat::solver s : all_solvers)
    words.push_back(std::string(name(s)) + (s == remat::solver::optimal ? " (default)," : ","));
  words.back().pop_back();
  std::string solvers = "  --solver NAME    one of:";
  std::size_t line_length = solvers.size();
  for (const std::string& word : words) {
    if (line_length + 1 + word.size() > 90) {
      solvers += "\n" + std::string(18, ' ');
      line_length = 18;
    }
    solvers += " " + word;
    line_length += 1 + word.size();
  }
  std::string text =
      "usage: remat-solve CHAIN.json --budget SIZE [--solver NAME] [--slots auto|exact|N]\n"
      "                   [--coarsen N|auto] [--bandwidth BW] [--in-flight K] [--json]\n"
      "       remat-solve CHAIN.json --budget SIZE --pipeline P [--schedule 1f1b|gpipe]\n"
      "                   [--micro-batches M | --in-flight K0,K1,...] [--solver NAME]\n"
      "                   [--slots auto|exact|N] [--json]\n"
      "       remat-solve CHAIN.json --sweep [--points N] [--solver NAME,...] [--csv FILE]"
      " [--plot FILE.svg]\n"
      "                   [--bandwidth BW] [--in-flight K]\n"
      "       remat-solve CHAIN.json --info [--bandwidth BW] [--in-flight K] [--json]\n"
      "       remat-solve CHAIN.json --frontier [--solver NAME] [--json]\n"
      "\n"
      "Finds the fastest schedule of forward, recompute and backward operations for the chain\n"
      "in CHAIN.json (format: docs/chain-format.md) that fits a memory budget.\n"
      "\n"
      "  --budget SIZE    total memory for activations, tapes, gradients and overheads, the\n"
      "                   input included, in the chain's memory units: an integer with an\n"
      "                   optional unit B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (1024)\n";
  text += solvers + "\n";
  text +=
      "  --slots auto|exact|N\n"
      "                   'auto' (the default): the exact optimum unless that is estimated\n"
      "                   past about 10 s or 2 GiB, and there the 500-slot schedule and how\n"
      "                   far from exact it can be; 'exact':\n"
      "                   the exact optimum on the sizes as given, or a refusal past the\n"
      "                   limits; N: cut the budget into N slots, sizes rounded up (Rotor's DP)\n";
  text +=
      "  --coarsen N|auto solve on at most N blocks of consecutive stages (cut where the\n"
      "                   blocks lose least) and print the schedule on the chain's stages;\n"
      "                   'auto' merges only as far as the solver needs to accept the chain\n"
      "  --bandwidth BW   the link to host memory for offloading, instead of the file's\n"
      "                   transfer object: a rate per second (B/s, KB/s, MB/s, GB/s, TB/s:\n"
      "                   1000s; KiB/s, MiB/s, GiB/s, TiB/s: 1024s) converted with the file's\n"
      "                   units, or a bare number in its memory units per time unit; OUT,IN\n"
      "                   for device-to-host and host-to-device apart (47GB/s,55GB/s); 0: none\n"
      "  --in-flight K    K micro-batches in flight, as on a pipeline stage (GPipe, 1F1B): the\n"
      "                   K - 1 others each hold what one keeps at the loss ('retained'), so a\n"
      "                   schedule fits when peak + (K - 1) x retained <= budget (default 1)\n"
      "  --pipeline P     cut the chain into P pipeline ranks of consecutive stages, each with\n"
      "                   its micro-batches in flight, so that the slowest rank is fastest with\n"
      "                   SIZE per rank; shows the equal split beside it\n"
      "  --schedule S     the pipeline's schedule: 1f1b (the default; rank r holds min(M, P - r)\n"
      "                   micro-batches) or gpipe (every rank holds M)\n"
      "  --micro-batches M  micro-batches per step (default 2P)\n"
      "  --in-flight K0,K1,...  with --pipeline: each rank's K as given, for the schedules\n"
      "                   --schedule does not name (interleaved: read K from the schedule)\n"
      "  --json           print one JSON object instead of the report (also with --info)\n"
      "  --block-options  (graph files) give each block options that keep fewer of its saved\n"
      "                   values and recompute the others in its backward; --info counts them\n"
      "  --sweep          solve at evenly spaced budgets, from the least at which the optimal\n"
      "                   solver finds a schedule to the peak of storing everything; print\n"
      "                   makespan, ratio to store-all and peak for each budget and solver;\n"
      "                   optimal and checkpoint-only on exact sizes also at every point of\n"
      "                   their curve (every budget where the makespan drops) in --csv, --plot\n"
      "  --points N       how many budgets (default 20, at least 2)\n"
      "  --solver A,B,..  the solvers to sweep (default: every solver; exhaustive only on\n"
      "                   chains it accepts)\n"
      "  --csv FILE       also write the sweep as CSV\n"
      "  --plot FILE.svg  also draw it: makespan over store-all against budget over store-all\n"
      "  --info           the chain's stages, input size, store-all peak and makespan, least\n"
      "                   feasible budget, and the most memory a single stage needs; with a\n"
      "                   transfer rate, how much of each stage's transfers compute can hide\n"
      "  --help           print this help\n"
      "\n"
      "Exit status: 0 a schedule was found, 1 no schedule fits the budget, 2 bad usage or bad\n"
      "input.\n";
  return text;
}

/// `SIZE` (remat::io::parse_size): a non-negative integer with an optional unit (B, KB, MB, GB,
/// KiB, MiB, GiB), exactly as written. Throws `usage_error` saying what is wrong.
inline size_type parse_size(std::string_view text) {
  try {
    return io::parse_size(text);
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string("--budget ") + e.what());
  }
}

namespace detail {

// A positive integer option value (--slots N, --points N).
inline std::int64_t parse_count(std::string_view option, std::string_view text,
                                std::string_view alternative = "") {
  const auto bad = [&] {
    return usage_error(std::string(option) + " '" + std::string(text) +
                       "': must be a positive integer" + std::string(alternative));
  };
  if (text.empty() || text.size() > 18) throw bad();
  std::int64_t value = 0;
  for (const char ch : text) {
    if (ch < '0' || ch > '9') throw bad();
    value = value * 10 + (ch - '0');
  }
  if (value == 0) throw bad();
  return value;
}

inline remat::solver parse_solver(std::string_view text) {
  if (const auto s = solver_from_name(text)) return *s;
  std::string known;
  for (const remat::solver s : all_solvers) {
    if (!known.empty()) known += ", ";
    known += name(s);
  }
  throw usage_error("unknown solver '" + std::string(text) + "' (known: " + known + ")");
}

}  // namespace detail

/// Parses the arguments after the program name. `--opt value` and `--opt=value` both work;
/// `--` ends the options. Throws `usage_error`.
inline solve_request parse_arguments(std::span<const std::string_view> args) {
  solve_request req;
  std::vector<std::string_view> positional;
  std::vector<std::string_view> seen;
  std::optional<std::string_view> budget, solver_list, slots, points, coarsen, bandwidth,
      in_flight, pipeline, schedule, micro_batches;
  bool sweep = false, info = false, frontier = false, options_done = false;

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (options_done || !arg.starts_with("-") || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      req.what = command::help;
      return req;
    }
    const auto eq = arg.find('=');
    const std::string_view option = arg.substr(0, eq);
    const std::optional<std::string_view> inline_value =
        eq == std::string_view::npos ? std::nullopt : std::optional(arg.substr(eq + 1));
    if (std::find(seen.begin(), seen.end(), option) != seen.end())
      throw usage_error(std::string(option) + " is given twice");
    seen.push_back(option);

    const auto flag = [&](bool& target) {
      if (inline_value) throw usage_error(std::string(option) + " takes no value");
      target = true;
    };
    const auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw usage_error(std::string(option) + " needs a value");
      return args[++i];
    };
    if (option == "--budget") {
      budget = value();
    } else if (option == "--solver") {
      solver_list = value();
    } else if (option == "--slots") {
      slots = value();
    } else if (option == "--json") {
      flag(req.json);
    } else if (option == "--sweep") {
      flag(sweep);
    } else if (option == "--info") {
      flag(info);
    } else if (option == "--block-options") {
      flag(req.block_options);
    } else if (option == "--frontier") {
      flag(frontier);
    } else if (option == "--points") {
      points = value();
    } else if (option == "--coarsen") {
      coarsen = value();
    } else if (option == "--bandwidth") {
      bandwidth = value();
    } else if (option == "--in-flight") {
      in_flight = value();
    } else if (option == "--pipeline") {
      pipeline = value();
    } else if (option == "--schedule") {
      schedule = value();
    } else if (option == "--micro-batches") {
      micro_batches = value();
    } else if (option == "--csv") {
      req.csv = std::string(value());
    } else if (option == "--plot") {
      req.plot = std::string(value());
    } else {
      throw usage_error("unknown option '" + std::string(option) + "'");
    }
  }

  if (positional.empty()) throw usage_error("no chain file given");
  if (positional.size() > 1)
    throw usage_error("one chain file expected, got '" + std::string(positional[0]) + "' and '" +
                      std::string(positional[1]) + "'");
  req.chain_path = std::string(positional[0]);
  if (req.chain_path.empty()) throw usage_error("the chain file name is empty");

  const int modes = (budget ? 1 : 0) + (sweep ? 1 : 0) + (info ? 1 : 0) + (frontier ? 1 : 0);
  if (modes == 0) throw usage_error("missing --budget SIZE (or --sweep, --info or --frontier)");
  if (modes > 1) throw usage_error("--budget, --sweep, --info and --frontier exclude each other");
  req.what = budget  ? command::solve
             : sweep ? command::sweep
             : info  ? command::info
                     : command::frontier;

  if (budget) req.budget = parse_size(*budget);
  if (solver_list) {
    std::string_view rest = *solver_list;
    while (true) {
      const auto comma = rest.find(',');
      req.solvers.push_back(detail::parse_solver(rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (req.solvers.size() > 1 && req.what != command::sweep)
      throw usage_error("--solver takes one name (a list is for --sweep)");
  }
  if (slots)
    req.slots = *slots == "exact" ? exact_units
                : *slots == "auto"
                    ? auto_slots
                    : detail::parse_count("--slots", *slots, " or 'exact' or 'auto'");
  if (points) req.points = detail::parse_count("--points", *points);
  if (in_flight && !pipeline)
    req.in_flight = static_cast<std::size_t>(detail::parse_count("--in-flight", *in_flight));
  if (coarsen)
    req.coarsen =
        *coarsen == "auto"
            ? auto_coarsening
            : static_cast<std::size_t>(detail::parse_count("--coarsen", *coarsen, " or 'auto'"));
  if (bandwidth) {
    try {
      req.bandwidth = parse_bandwidth("--bandwidth", *bandwidth);
    } catch (const bandwidth_error& e) {
      throw usage_error(e.what());
    }
  }
  if (req.csv && req.csv->empty()) throw usage_error("--csv needs a file name");
  if (req.plot && req.plot->empty()) throw usage_error("--plot needs a file name");

  const auto given = [&](std::string_view o) {
    return std::find(seen.begin(), seen.end(), o) != seen.end();
  };
  if (req.what != command::sweep) {
    for (const std::string_view sweep_only : {"--points", "--csv", "--plot"})
      if (given(sweep_only))
        throw usage_error(std::string(sweep_only) + " applies only to --sweep");
  }
  if (req.what != command::solve && given("--coarsen"))
    throw usage_error("--coarsen applies only to --budget");
  if (req.what == command::info && given("--solver"))
    throw usage_error("--solver does not apply to --info");
  // The frontier is that of the DP solvers, which do not offload.
  if (req.what == command::frontier && given("--bandwidth"))
    throw usage_error("--bandwidth does not apply to --frontier");
  if (req.what == command::frontier && given("--in-flight"))
    throw usage_error("--in-flight does not apply to --frontier (use --sweep --in-flight K)");
  if (req.what == command::sweep && given("--json"))
    throw usage_error("--json does not apply to --sweep (use --csv FILE)");
  if (pipeline) {
    if (req.what != command::solve) throw usage_error("--pipeline applies only to --budget");
    req.pipeline = static_cast<std::size_t>(detail::parse_count("--pipeline", *pipeline));
    if (in_flight) {
      // K for each rank, for the schedules --schedule does not name (interleaved, looped, ...).
      if (schedule)
        throw usage_error("--schedule and --in-flight K0,K1,... exclude each other (the list "
                          "gives each rank's K itself)");
      std::string_view rest = *in_flight;
      while (true) {
        const auto comma = rest.find(',');
        req.rank_in_flight.push_back(
            static_cast<std::size_t>(detail::parse_count("--in-flight", rest.substr(0, comma))));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      if (req.rank_in_flight.size() != req.pipeline)
        throw usage_error("--in-flight with --pipeline " + std::to_string(req.pipeline) +
                          " lists each rank's K: " + std::to_string(req.pipeline) +
                          " values, not " + std::to_string(req.rank_in_flight.size()));
    }
    if (schedule) {
      const auto s = parse_pipeline_schedule(*schedule);
      if (!s)
        throw usage_error("--schedule '" + std::string(*schedule) +
                          "': one of 1f1b, gpipe (schedules that split the backward are not "
                          "modelled)");
      req.schedule = *s;
    }
    req.micro_batches =
        micro_batches
            ? static_cast<std::size_t>(detail::parse_count("--micro-batches", *micro_batches))
            : in_flight ? 0 : 2 * req.pipeline;
  } else {
    for (const std::string_view pipeline_only : {"--schedule", "--micro-batches"})
      if (given(pipeline_only))
        throw usage_error(std::string(pipeline_only) + " applies only to --pipeline P");
  }
  if (req.points && *req.points < 2)
    throw usage_error("--points '" + std::string(*points) + "': a sweep needs at least 2 budgets");
  return req;
}

/// Everything the two output forms report, computed once.

}  // namespace remat::tools
