// remat-solve: the argument parser and the command, separate from main() so that tests and a
// fuzzer can drive them in-process. The contract is docs/chain-format.md, "remat-solve".
#pragma once

#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace remat::tools {

/// A command line that does not make sense; the message says what to change.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class command : std::uint8_t { solve, sweep, info, help };

/// What the command line asks for.
struct solve_request {
  command what = command::solve;
  std::string chain_path;
  size_type budget = 0;                ///< --budget, in the chain's memory units
  std::vector<remat::solver> solvers;  ///< --solver (a list only for --sweep)
  size_type slots = default_slots;     ///< --slots N, or exact_units for --slots exact
  bool json = false;                   ///< --json
  std::optional<std::int64_t> points;  ///< --points N (sweep)
  std::optional<std::string> csv;      ///< --csv FILE (sweep)
  std::optional<std::string> plot;     ///< --plot FILE.svg (sweep)
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
      "usage: remat-solve CHAIN.json --budget SIZE [--solver NAME] [--slots N|exact] [--json]\n"
      "       remat-solve CHAIN.json --sweep [--points N] [--solver NAME,...] [--csv FILE]"
      " [--plot FILE.svg]\n"
      "       remat-solve CHAIN.json --info\n"
      "\n"
      "Finds the fastest schedule of forward, recompute and backward operations for the chain\n"
      "in CHAIN.json (format: docs/chain-format.md) that fits a memory budget.\n"
      "\n"
      "  --budget SIZE    total memory for activations, tapes, gradients and overheads, the\n"
      "                   input included, in the chain's memory units: an integer with an\n"
      "                   optional unit B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (1024)\n";
  text += solvers + "\n";
  text += "  --slots N|exact  cut the budget into N slots and round sizes up to whole slots\n";
  text += "                   (default " + std::to_string(default_slots) +
          "); 'exact' uses the sizes as given\n";
  text +=
      "  --json           print one JSON object instead of the report\n"
      "  --sweep, --info  not implemented yet\n"
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
  std::optional<std::string_view> budget, solver_list, slots, points;
  bool sweep = false, info = false, options_done = false;

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
    } else if (option == "--points") {
      points = value();
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

  const int modes = (budget ? 1 : 0) + (sweep ? 1 : 0) + (info ? 1 : 0);
  if (modes == 0) throw usage_error("missing --budget SIZE (or --sweep, or --info)");
  if (modes > 1) throw usage_error("--budget, --sweep and --info exclude each other");
  req.what = budget ? command::solve : sweep ? command::sweep : command::info;

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
        *slots == "exact" ? exact_units : detail::parse_count("--slots", *slots, " or 'exact'");
  if (points) req.points = detail::parse_count("--points", *points);
  if (req.csv && req.csv->empty()) throw usage_error("--csv needs a file name");
  if (req.plot && req.plot->empty()) throw usage_error("--plot needs a file name");

  if (req.what == command::solve) {
    for (const std::string_view sweep_only : {"--points", "--csv", "--plot"})
      if (std::find(seen.begin(), seen.end(), sweep_only) != seen.end())
        throw usage_error(std::string(sweep_only) + " applies only to --sweep");
  }
  if (req.what == command::info) {
    for (const std::string_view solve_only : {"--json", "--slots", "--solver"})
      if (std::find(seen.begin(), seen.end(), solve_only) != seen.end())
        throw usage_error(std::string(solve_only) + " does not apply to --info");
  }
  return req;
}

/// Everything the two output forms report, computed once.
struct solve_report {
  const io::chain_file* file = nullptr;
  remat::solver solver = remat::solver::optimal;
  size_type slots = default_slots;
  solve_result result;
  replay_result replayed;   ///< the plan replayed on the chain's own sizes (if feasible)
  replay_result store_all;  ///< the store-all schedule replayed
};

inline solve_report compute_report(const io::chain_file& file, const solve_request& req) {
  solve_report rep;
  rep.file = &file;
  rep.solver = req.solvers.empty() ? remat::solver::optimal : req.solvers.front();
  rep.slots = req.slots;
  rep.result = remat::solve(file.chain, req.budget, {.solver = rep.solver, .slots = req.slots});
  if (rep.result.feasible) rep.replayed = simulate(file.chain, rep.result.plan);
  const auto L = static_cast<std::int32_t>(file.chain.length());
  const std::vector<op> all = store_all_ops(L);
  rep.store_all = simulate(file.chain, std::span<const op>(all));
  return rep;
}

/// The `--json` form: one object, keys in chain-format.md's order, on one line. `makespan` and
/// `peak_memory` are null when no schedule fits; `min_feasible_budget` is null when no budget
/// would do (too few slots).
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
    solver_text += ", --slots " + std::to_string(rep.slots) +
                   ": sizes rounded up to multiples of " + format_memory(r.unit, mu);
  else
    solver_text += ", exact sizes";
  line("solver", solver_text);
  line("budget", format_memory(r.budget, mu));

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

/// Runs `remat-solve` with `args` (without the program name). Writes the result to `out` only
/// when it succeeds (exit 0 or 1); every problem goes to `err` with exit status 2.
inline int run_solve(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  constexpr int found = 0, does_not_fit = 1, bad_input = 2;
  try {
    const solve_request req = parse_arguments(args);
    if (req.what == command::help) {
      out << usage_text();
      return found;
    }
    if (req.what != command::solve) {
      err << "remat-solve: " << (req.what == command::sweep ? "--sweep" : "--info")
          << " is not implemented yet\n";
      return bad_input;
    }
    const io::chain_file file = io::read_chain_file(req.chain_path);
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
