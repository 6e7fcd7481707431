// remat-solve: the argument parser and the command, separate from main() so that tests and a
// fuzzer can drive them in-process. The contract is docs/chain-format.md, "remat-solve".
#pragma once

#include "sweep_output.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>
#include <remat/sweep.hpp>
#include <remat/trade_off.hpp>

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
  size_type slots = default_slots;      ///< --slots N, or exact_units for --slots exact
  bool json = false;                    ///< --json
  std::optional<std::int64_t> points;   ///< --points N (sweep)
  std::optional<std::string> csv;       ///< --csv FILE (sweep)
  std::optional<std::string> plot;      ///< --plot FILE.svg (sweep)
  std::size_t coarsen = no_coarsening;  ///< --coarsen N, or auto_coarsening for --coarsen auto
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
      "usage: remat-solve CHAIN.json --budget SIZE [--solver NAME] [--slots N|exact]\n"
      "                   [--coarsen N|auto] [--json]\n"
      "       remat-solve CHAIN.json --sweep [--points N] [--solver NAME,...] [--csv FILE]"
      " [--plot FILE.svg]\n"
      "       remat-solve CHAIN.json --info\n"
      "       remat-solve CHAIN.json --frontier [--solver NAME] [--json]\n"
      "\n"
      "Finds the fastest schedule of forward, recompute and backward operations for the chain\n"
      "in CHAIN.json (format: docs/chain-format.md) that fits a memory budget.\n"
      "\n"
      "  --budget SIZE    total memory for activations, tapes, gradients and overheads, the\n"
      "                   input included, in the chain's memory units: an integer with an\n"
      "                   optional unit B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (1024)\n";
  text += solvers + "\n";
  text += "  --slots N|exact  cut the budget into N slots and round sizes up to whole slots\n";
  text += "                   (Rotor's DP); 'exact' (the default) uses the sizes as given\n";
  text +=
      "  --coarsen N|auto solve on at most N blocks of consecutive stages (cut where the\n"
      "                   blocks lose least) and print the schedule on the chain's stages;\n"
      "                   'auto' merges only as far as the solver needs to accept the chain\n"
      "  --json           print one JSON object instead of the report (also with --info)\n"
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
      "                   feasible budget, and the most memory a single stage needs\n"
      "  --help           print this help\n"
      "\n"
      "Exit status: 0 a schedule was found, 1 no schedule fits the budget, 2 bad usage or bad\n"
      "input.\n";
  return text;
}

/// `SIZE`: a non-negative integer with an optional unit (B, KB, MB, GB, KiB, MiB, GiB), exactly
/// as written (no sign, no space, no fraction). Throws `usage_error` saying what is wrong.
inline size_type parse_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = text.substr(digits);
  const auto bad = [&](const std::string& why) -> usage_error {
    return usage_error("--budget '" + std::string(text) + "': " + why);
  };
  if (number.empty() || unit.starts_with(".") || unit.starts_with(","))
    throw bad("must be a non-negative integer with an optional unit (e.g. 800, 12GB, 1536MiB)");
  struct suffix {
    std::string_view name;
    size_type factor;
  };
  static constexpr suffix units[] = {{"", 1},
                                     {"B", 1},
                                     {"KB", 1000},
                                     {"MB", 1000000},
                                     {"GB", 1000000000},
                                     {"KiB", size_type{1} << 10},
                                     {"MiB", size_type{1} << 20},
                                     {"GiB", size_type{1} << 30}};
  const auto* found = std::find_if(std::begin(units), std::end(units),
                                   [&](const suffix& s) { return s.name == unit; });
  if (found == std::end(units))
    throw bad("unknown unit '" + std::string(unit) + "' (use B, KB, MB, GB, KiB, MiB or GiB)");
  constexpr size_type limit = std::numeric_limits<size_type>::max();
  size_type value = 0;
  for (const char ch : number) {
    const size_type digit = ch - '0';
    if (value > (limit - digit) / 10) throw bad("too large (the limit is 2^63 - 1 units)");
    value = value * 10 + digit;
  }
  if (value > limit / found->factor) throw bad("too large (the limit is 2^63 - 1 units)");
  return value * found->factor;
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
  std::optional<std::string_view> budget, solver_list, slots, points, coarsen;
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
    } else if (option == "--frontier") {
      flag(frontier);
    } else if (option == "--points") {
      points = value();
    } else if (option == "--coarsen") {
      coarsen = value();
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
  if (modes == 0) throw usage_error("missing --budget SIZE (or --sweep, or --info)");
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
    req.slots =
        *slots == "exact" ? exact_units
        : *slots == "auto"
            ? auto_slots
            : detail::parse_count("--slots", *slots, " or 'exact' or 'auto'");
  if (points) req.points = detail::parse_count("--points", *points);
  if (coarsen)
    req.coarsen =
        *coarsen == "auto"
            ? auto_coarsening
            : static_cast<std::size_t>(detail::parse_count("--coarsen", *coarsen, " or 'auto'"));
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
  if (req.what == command::sweep && given("--json"))
    throw usage_error("--json does not apply to --sweep (use --csv FILE)");
  if (req.points && *req.points < 2)
    throw usage_error("--points '" + std::string(*points) + "': a sweep needs at least 2 budgets");
  return req;
}

/// Everything the two output forms report, computed once.
struct solve_report {
  const io::chain_file* file = nullptr;
  remat::solver solver = remat::solver::optimal;
  size_type slots = default_slots;
  std::size_t coarsen = no_coarsening;  ///< what --coarsen asked for
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
  // Every hardware thread fills the DP table: the schedule does not depend on their number.
  rep.result = remat::solve(
      file.chain, req.budget,
      {.solver = rep.solver, .slots = req.slots, .threads = 0, .coarsen = req.coarsen});
  if (rep.result.feasible) rep.replayed = simulate(file.chain, rep.result.plan);
  const auto L = static_cast<std::int32_t>(file.chain.length());
  const std::vector<op> all = store_all_ops(L);
  rep.store_all = simulate(file.chain, std::span<const op>(all));
  return rep;
}

/// The `--json` form: one object, keys in chain-format.md's order, on one line. `makespan` and
/// `peak_memory` are null when no schedule fits; `min_feasible_budget` is null when no budget
/// would do (too few slots).
namespace detail {
// The default solve of a DP solver that fell back on 500 slots: it reports its bounds.
inline bool bounded(const solve_report& rep) {
  const bool dp = rep.solver == remat::solver::optimal ||
                  rep.solver == remat::solver::checkpoint_only;
  return dp && rep.slots == auto_slots && rep.result.feasible && !rep.result.exact;
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
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const op& o : r.plan.ops) {
    nlohmann::ordered_json jo;
    jo["op"] = std::string(name(o.kind));
    if (o.kind != op_kind::loss) jo["stage"] = o.stage;
    ops.push_back(std::move(jo));
  }
  j["ops"] = std::move(ops);
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

}  // namespace detail

/// The report for a person: what was asked, how the schedule compares with storing everything,
/// what it recomputes, and its ops.
inline std::string format_report(const solve_report& rep) {
  using detail::format_memory;
  using detail::format_time;
  const io::chain_file& f = *rep.file;
  const solve_result& r = rep.result;
  const std::string& mu = f.memory_unit;
  const std::string& tu = f.time_unit;
  const auto L = f.chain.length();
  const auto stage_label = [&](std::size_t k) {
    if (k < f.stage_names.size() && !f.stage_names[k].empty())
      return detail::printable(f.stage_names[k]);
    return "stage " + std::to_string(k);
  };

  std::string out;
  const auto label = [](std::string_view text) {
    std::string l(text);
    l.resize(11, ' ');
    return l;
  };
  const auto line = [&](std::string_view key, const std::string& text) {
    out += label(key) + text + '\n';
  };

  std::string units;
  if (!tu.empty()) units += "time in " + detail::printable(tu);
  if (!mu.empty()) units += (units.empty() ? "" : ", ") + ("memory in " + detail::printable(mu));
  std::string chain_text = std::to_string(L) + (L == 1 ? " stage" : " stages");
  if (!units.empty()) chain_text += "; " + units;
  line("chain", f.name.empty() ? chain_text : detail::printable(f.name) + " (" + chain_text + ")");

  std::string solver_text(name(rep.solver));
  if (r.unit > 1)
    solver_text += ", " + std::to_string(rep.slots == auto_slots ? rotor_slots : rep.slots) +
                   " slots: sizes rounded up to multiples of " + format_memory(r.unit, mu);
  else
    solver_text += ", exact sizes";
  if (detail::bounded(rep)) {
    char bound[160];
    std::snprintf(bound, sizeof bound,
                  " (within %.2g%% of memory and %.2g%% of makespan of the exact optimum)",
                  100 * r.memory_loss, 100 * r.makespan_loss);
    solver_text += bound;
  }
  line("solver", solver_text);
  line("budget", format_memory(r.budget, mu));
  if (rep.coarsen != no_coarsening) {
    const std::string asked = rep.coarsen == auto_coarsening
                                  ? std::string("--coarsen auto")
                                  : "--coarsen " + std::to_string(rep.coarsen);
    if (r.coarse_length == 0)
      line("coarsened",
           "no: " +
               std::string(rep.coarsen == auto_coarsening
                               ? std::string(name(rep.solver)) + " accepts the chain as given"
                               : "the chain has no more stages than that") +
               " (" + asked + ")");
    else
      line("coarsened", std::to_string(L) + " stages merged into " +
                            std::to_string(r.coarse_length) + " blocks of up to " +
                            std::to_string(r.largest_block) + " stages (" + asked +
                            "); ops below on the chain's stages");
  }

  const double base_time = rep.store_all.makespan;
  const size_type base_memory = rep.store_all.peak_memory;
  if (!r.feasible) {
    line("result", "no schedule fits the budget");
    if (r.min_feasible_budget == solve_result::no_budget)
      line("min budget",
           "none with --slots " + std::to_string(rep.slots) + "; try more slots or --slots exact");
    else
      line("min budget", format_memory(r.min_feasible_budget, mu) + " for " +
                             std::string(name(rep.solver)) +
                             (rep.solver == remat::solver::store_all
                                  ? std::string()
                                  : "; store-all " + format_memory(base_memory, mu)));
    return out;
  }

  const double makespan = rep.replayed.makespan;
  std::string time_text = format_time(makespan, tu) + ", store-all " + format_time(base_time, tu);
  if (base_time > 0) {
    const double extra = makespan - base_time;
    time_text +=
        " (" + std::string(extra >= 0 ? "+" : "") + detail::percent(extra, base_time) + ")";
  }
  line("makespan", time_text);
  std::string peak_text = format_memory(rep.replayed.peak_memory, mu);
  if (r.budget > 0)
    peak_text += ", " +
                 detail::percent(static_cast<double>(rep.replayed.peak_memory),
                                 static_cast<double>(r.budget)) +
                 " of the budget";
  peak_text += "; store-all " + format_memory(base_memory, mu);
  line("peak", peak_text);
  if (r.min_feasible_budget != solve_result::no_budget)
    line("min budget",
         format_memory(r.min_feasible_budget, mu) + " for " + std::string(name(rep.solver)));

  // Every stage runs forward at least once; the other runs are recomputations.
  std::vector<int> forwards(L, 0);
  for (const op& o : r.plan.ops)
    if (o.kind != op_kind::loss && o.kind != op_kind::backward)
      ++forwards[static_cast<std::size_t>(o.stage)];
  std::vector<std::string> recomputed;
  int recomputations = 0;
  double recompute_time = 0;
  for (std::size_t k = 0; k < L; ++k) {
    const int extra = std::max(forwards[k] - 1, 0);
    if (extra == 0) continue;
    recomputations += extra;
    recompute_time += extra * f.chain.stages[k].forward_time;
    recomputed.push_back(stage_label(k) + (extra > 1 ? " x" + std::to_string(extra) : "") + ",");
  }
  if (recomputed.empty()) {
    line("recomputes", "nothing");
  } else {
    recomputed.back().pop_back();
    std::string head = std::to_string(recomputations) +
                       (recomputations == 1 ? " forward" : " forwards") + " (" +
                       format_time(recompute_time, tu) + "):";
    recomputed.insert(recomputed.begin(), head);
    out += detail::wrap(recomputed, label("recomputes"), detail::line_width);
  }

  line("schedule", std::to_string(r.plan.ops.size()) + " ops");
  std::vector<std::string> words;
  words.reserve(r.plan.ops.size());
  for (const op& o : r.plan.ops) words.push_back(to_string(o));
  out += detail::wrap(words, "  ", detail::line_width);

  const bool named = std::any_of(f.stage_names.begin(), f.stage_names.end(),
                                 [](const std::string& n) { return !n.empty(); });
  if (named) {
    words.clear();
    for (std::size_t k = 0; k < L; ++k)
      words.push_back(std::to_string(k) + " " + stage_label(k) + (k + 1 < L ? "," : ""));
    out += detail::wrap(words, label("stages"), detail::line_width);
  }
  return out;
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
};

/// The memory stage `k` needs whatever the schedule: the peak of storing everything on the chain
/// of that stage alone (its input, the stage, a free loss), which is the larger of F_all(k)
/// (input, tape, recording overhead) and B(k) (input, tape, incoming and outgoing gradients,
/// backward overhead); every schedule of the chain runs both with at least that much held. For
/// `k` = L, the loss: its input and its gradient, and its overhead.
inline size_type stage_requirement(const chain& c, std::size_t k) {
  if (k == c.length()) {
    const size_type x = c.stages.back().output_size;
    return x + x + c.loss_overhead;
  }
  chain alone;
  alone.input_size = k == 0 ? c.input_size : c.stages[k - 1].output_size;
  alone.stages = {c.stages[k]};
  const std::vector<op> ops = store_all_ops(1);
  return simulate(alone, std::span<const op>(ops)).peak_memory;
}

inline info_report compute_info(const io::chain_file& file, const solve_request& req) {
  info_report rep;
  rep.file = &file;
  rep.slots = req.slots;
  const chain& c = file.chain;
  const std::vector<op> all = store_all_ops(static_cast<std::int32_t>(c.length()));
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
  return j.dump() + '\n';
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
  if (rep.min_budget == solve_result::no_budget)
    line("min budget", "none for optimal with " + detail::least_slots_text(rep.slots) +
                           "; try more slots or --slots exact");
  else
    line("min budget", format_memory(rep.min_budget, mu) + share(rep.min_budget) +
                           ", for optimal with " + detail::least_slots_text(rep.slots));
  if (rep.min_budget_exact != solve_result::no_budget)
    line("", format_memory(rep.min_budget_exact, mu) + share(rep.min_budget_exact) +
                 ", on exact sizes (min-memory)");
  line("largest stage", format_memory(rep.largest_requirement, mu) +
                            share(rep.largest_requirement) + ", " +
                            detail::stage_label(f, rep.largest_stage) + " alone");
  line("", "(its forward with tape and its backward: no schedule fits in less)");
  return out;
}

/// The solvers `--sweep` runs: those asked for, or every solver but `exhaustive` on chains too
/// long for it (then `note` says so).
inline std::vector<remat::solver> sweep_solvers(const solve_request& req, const chain& c,
                                                std::string& note) {
  if (!req.solvers.empty()) return req.solvers;
  std::vector<remat::solver> out;
  for (const remat::solver s : all_solvers) {
    if (s == remat::solver::exhaustive && c.length() > exhaustive_max_stages) {
      note = "remat-solve: --sweep leaves out exhaustive: the chain has " +
             std::to_string(c.length()) + " stages, more than its limit of " +
             std::to_string(exhaustive_max_stages) + "\n";
      continue;
    }
    out.push_back(s);
  }
  return out;
}

/// The sweep as a table: one row per budget and solver, then each solver's least budget.
inline std::string format_sweep(const io::chain_file& f, const sweep_result& s, size_type slots) {
  using detail::format_memory;
  const std::string& mu = f.memory_unit;
  const std::string& tu = f.time_unit;
  std::string out;
  const auto line = [&](std::string_view key, const std::string& text) {
    std::string l(key);
    l.resize(11, ' ');
    out += l + text + '\n';
  };
  const auto fraction = [&](size_type b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * memory_fraction(s, b));
    return std::string(buf);
  };
  line("chain", detail::chain_line(f));
  line("store-all", "makespan " + detail::format_time(s.store_all_makespan, tu) + ", peak " +
                        format_memory(s.store_all_memory, mu));
  line("budgets", std::to_string(s.budgets.size()) + ", evenly spaced from " +
                      format_memory(s.budgets.front(), mu) + ", " + fraction(s.budgets.front()) +
                      " of store-all,");
  line("", "the least for optimal with " + detail::least_slots_text(slots) + ", to " +
               format_memory(s.budgets.back(), mu));
  std::string curves;
  for (const sweep_series& series : s.series) {
    if (series.curve.empty()) continue;
    curves += (curves.empty() ? "" : ", ") + std::string(name(series.solver)) + " " +
              std::to_string(series.curve.size()) +
              (series.curve.size() == 1 ? " point" : " points");
  }
  if (!curves.empty()) {
    line("curves", curves + ": every budget");
    line("", "where the makespan drops, in --csv and --plot");
  }
  out += '\n';

  using row = std::vector<std::string>;
  std::vector<row> rows;
  const std::string time_head =
      tu.empty() ? "makespan" : "makespan (" + detail::printable(tu) + ")";
  const std::string memory_head = mu.empty() ? "" : " (" + detail::printable(mu) + ")";
  rows.push_back(
      {"budget" + memory_head, "of store-all", "solver", time_head, "ratio", "peak" + memory_head});
  for (std::size_t k = 0; k < s.budgets.size(); ++k) {
    for (std::size_t n = 0; n < s.series.size(); ++n) {
      const sweep_series& series = s.series[n];
      const solve_result& r = series.results[k];
      row cells;
      cells.push_back(n == 0 ? std::to_string(s.budgets[k]) : "");
      cells.push_back(n == 0 ? fraction(s.budgets[k]) : "");
      cells.emplace_back(name(series.solver));
      if (r.feasible) {
        const double ratio = time_ratio(s, r.plan.makespan);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4f", ratio);
        cells.push_back(detail::format_time(r.plan.makespan, ""));
        cells.emplace_back(std::isnan(ratio) ? "-" : buf);
        cells.push_back(std::to_string(r.plan.peak_memory));
      } else {
        cells.insert(cells.end(), {"infeasible", "-", "-"});
      }
      rows.push_back(std::move(cells));
    }
  }
  // Numbers right-aligned, the solver name left-aligned.
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const row& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string text;
    for (std::size_t c = 0; c < rows[k].size(); ++c) {
      const std::string& cell = rows[k][c];
      const std::string pad(width[c] - cell.size(), ' ');
      text += (c == 0 ? "" : "  ") + (c == 2 ? cell + pad : pad + cell);
    }
    while (text.ends_with(' ')) text.pop_back();
    out += text + '\n';
    if (k + 1 < rows.size() && k > 0 && k % s.series.size() == 0 && s.series.size() > 1)
      out += '\n';
  }

  out += "\nleast budget of each solver (" + detail::least_slots_text(slots) + " for the DP solvers):\n";
  std::size_t name_width = 0;
  for (const sweep_series& series : s.series)
    name_width = std::max(name_width, name(series.solver).size());
  for (const sweep_series& series : s.series) {
    std::string n(name(series.solver));
    n.resize(name_width, ' ');
    out += "  " + n + "  " +
           (series.min_feasible_budget == solve_result::no_budget
                ? std::string("none")
                : format_memory(series.min_feasible_budget, mu) + ", " +
                      fraction(series.min_feasible_budget) + " of store-all") +
           '\n';
  }
  return out;
}

/// An output file that cannot be written; the message names it.
class output_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// An output file, opened (truncated) before the work that fills it, so that a bad path fails at
// once; removed again unless `commit` wrote it completely.
class output_file {
 public:
  explicit output_file(std::string path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr)
      throw output_error("cannot write '" + path_ + "': " + std::strerror(errno));
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (file_ == nullptr) return;
    std::fclose(file_);
    std::remove(path_.c_str());
  }
  void commit(const std::string& text) {
    const bool written = std::fwrite(text.data(), 1, text.size(), file_) == text.size();
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!written || !closed) {
      std::remove(path_.c_str());
      throw output_error("cannot write '" + path_ + "'");
    }
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace detail

/// `--sweep`: the table for `out`, the CSV and SVG files when asked; with `show_progress`, progress
/// on `err` when the sweep takes more than a second.
inline std::string run_sweep(const io::chain_file& file, const solve_request& req,
                             std::ostream& err, bool show_progress) {
  std::string note;
  sweep_options options;
  options.solvers = sweep_solvers(req, file.chain, note);
  options.points = req.points ? static_cast<std::size_t>(*req.points) : 20;
  options.slots = req.slots;
  options.threads = 0;  // every hardware thread, as for one budget
  std::optional<detail::output_file> csv_file, plot_file;
  if (req.csv) csv_file.emplace(*req.csv);
  if (req.plot) plot_file.emplace(*req.plot);
  err << note;

  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  clock::time_point shown{};
  bool showing = false;
  if (show_progress)
    options.progress = [&](std::size_t done, std::size_t total) {
      const clock::time_point now = clock::now();
      if (now - start < std::chrono::seconds(1)) return;
      if (showing && done < total && now - shown < std::chrono::milliseconds(250)) return;
      err << "\rremat-solve: sweep: " << done << "/" << total << " solves" << std::flush;
      showing = true;
      shown = now;
    };
  sweep_result s;
  try {
    s = remat::sweep(file.chain, options);
  } catch (...) {
    if (showing) err << '\n';
    throw;
  }
  if (showing) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " in %.1f s\n",
                  std::chrono::duration<double>(clock::now() - start).count());
    err << buf;
  }

  if (req.csv) {
    std::string csv(sweep_csv_header);
    csv += '\n';
    csv += sweep_csv_rows(s);
    csv_file->commit(csv);
  }
  if (req.plot) {
    const std::string title =
        (file.name.empty() ? std::string("chain") : detail::printable(file.name)) +
        ": makespan against memory budget";
    std::string subtitle = std::to_string(file.chain.length()) + " stages; store-all: makespan " +
                           detail::format_time(s.store_all_makespan, file.time_unit) + ", peak " +
                           detail::format_memory(s.store_all_memory, file.memory_unit) + "; " +
                           detail::slots_text(req.slots) + " for the DP solvers";
    plot_file->commit(svg::render(sweep_chart(s, title, subtitle)));
  }
  return format_sweep(file, s, req.slots);
}

/// `--frontier`: the curve of `remat::trade_off`, one point per line (budget, makespan), or with
/// `--json` one object `{"solver", "epsilon", "points": [{"budget", "makespan"}, ...]}`.
inline std::string format_frontier(const io::chain_file& file, const solve_request& req) {
  const solver which = req.solvers.empty() ? solver::optimal : req.solvers.front();
  const trade_off_result curve = trade_off(file.chain, {.solver = which, .threads = 0});
  if (req.json) {
    nlohmann::ordered_json j;
    j["solver"] = std::string(name(which));
    j["epsilon"] = 0.0;  // the curve is exact (the contract's key)
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const trade_off_point& p : curve.points)
      points.push_back({{"budget", p.budget}, {"makespan", p.makespan}});
    j["points"] = std::move(points);
    return j.dump() + '\n';
  }
  std::string text = "chain      " + file.name + " (" + std::to_string(file.chain.length()) +
                     " stages)\nsolver     " + std::string(name(which)) + ", " +
                     std::to_string(curve.points.size()) + " points";
  text += "\n\n        budget        makespan\n";
  for (const trade_off_point& p : curve.points) {
    char line[96];
    std::snprintf(line, sizeof line, "%14lld  %14.6g\n", static_cast<long long>(p.budget), p.makespan);
    text += line;
  }
  return text;
}

/// Runs `remat-solve` with `args` (without the program name). Writes the result to `out` only
/// when it succeeds (exit 0 or 1); every problem goes to `err` with exit status 2. With
/// `show_progress` (stderr is a terminal), a sweep longer than a second reports progress on `err`.
inline int run_solve(std::span<const std::string_view> args, std::ostream& out, std::ostream& err,
                     bool show_progress = false) {
  constexpr int found = 0, does_not_fit = 1, bad_input = 2;
  try {
    const solve_request req = parse_arguments(args);
    if (req.what == command::help) {
      out << usage_text();
      return found;
    }
    const io::chain_file file = io::read_chain_file(req.chain_path);
    if (req.what == command::info) {
      const info_report rep = compute_info(file, req);
      out << (req.json ? format_info_json(rep) : format_info(rep));
      return found;
    }
    if (req.what == command::sweep) {
      out << run_sweep(file, req, err, show_progress);
      return found;
    }
    if (req.what == command::frontier) {
      out << format_frontier(file, req);
      return found;
    }
    const solve_report rep = compute_report(file, req);
    // Built completely before anything is written, so a failure leaves stdout empty.
    const std::string text = req.json ? format_json(rep) : format_report(rep);
    out << text;
    return rep.result.feasible ? found : does_not_fit;
  } catch (const usage_error& e) {
    err << "remat-solve: " << e.what() << "\nTry 'remat-solve --help' for more information.\n";
  } catch (const io::chain_file_error& e) {
    err << "remat-solve: " << e.what() << '\n';
  } catch (const solver_error& e) {
    err << "remat-solve: " << e.what() << '\n';
  } catch (const output_error& e) {
    err << "remat-solve: " << e.what() << '\n';
  } catch (const std::bad_alloc&) {
    err << "remat-solve: out of memory\n";
  } catch (const std::exception& e) {
    err << "remat-solve: internal error: " << e.what() << '\n';
  } catch (...) {
    err << "remat-solve: internal error\n";
  }
  return bad_input;
}

}  // namespace remat::tools
