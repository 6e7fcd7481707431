// remat-solve: the command, separate from main() so that tests and a fuzzer can drive it
// in-process: the parser (solve_args.hpp), the reports (solve_report.hpp) and the sweeps
// (solve_sweep.hpp). The contract is docs/chain-format.md, "remat-solve".
#pragma once

#include "graph_input.hpp"
#include "solve_args.hpp"
#include "solve_pipeline.hpp"
#include "solve_report.hpp"
#include "solve_sweep.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>

#include <exception>
#include <new>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

namespace remat::tools {

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
    // A graph file is linearized into the chain of its blocks; everything below takes that chain.
    const std::optional<graph_input> graph_in =
        read_graph_input(req.chain_path, {.block_options = req.block_options});
    if (!graph_in && req.block_options)
      throw usage_error("--block-options applies to graph files only (remat-graph/1)");
    io::chain_file file = graph_in ? graph_in->chain : io::read_chain_file(req.chain_path);
    if (graph_in && req.bandwidth)
      throw usage_error("--bandwidth: graphs are solved without offloading");
    if (req.bandwidth) {
      try {
        set_transfer(file.chain, *req.bandwidth, file.time_unit, file.memory_unit);
      } catch (const bandwidth_error& e) {
        throw usage_error(e.what());
      }
    }
    if (req.what == command::info) {
      const info_report rep = compute_info(file, req);
      out << (req.json ? format_info_json(rep) : format_info(rep));
      if (graph_in && !req.json) out << format_graph_info(*graph_in, file.memory_unit);
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
    if (req.pipeline > 0) {
      const pipeline_report rep = compute_pipeline(file, req);
      out << (req.json ? format_pipeline_json(rep) : format_pipeline(rep));
      return rep.split.feasible ? found : does_not_fit;
    }
    const solve_report rep = compute_report(file, req);
    // Built completely before anything is written, so a failure leaves stdout empty.
    std::string text = req.json ? format_json(rep) : format_report(rep);
    if (graph_in && rep.result.feasible) {
      const node_replay r =
          confirm_at_node_level(*graph_in, rep.result.schedule, rep.replayed.peak_memory);
      if (!req.json)
        text += "node level " + std::to_string(r.steps) + " node steps replayed, peak " +
                detail::format_memory(r.peak_memory, file.memory_unit) +
                " (within the chain's)\n";
    }
    out << text;
    return rep.result.feasible ? found : does_not_fit;
  } catch (const usage_error& e) {
    err << "remat-solve: " << e.what() << "\nTry 'remat-solve --help' for more information.\n";
  } catch (const io::chain_file_error& e) {
    err << "remat-solve: " << e.what() << '\n';
  } catch (const io::graph_file_error& e) {
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
