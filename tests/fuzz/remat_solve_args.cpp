// Fuzz target: remat-solve's command line (examples/tools/solve_command.hpp). The bytes are the
// arguments, separated by NUL. Every command line either parses or throws `usage_error`; one that
// asks to solve is run, in-process, on a small fixed chain instead of a file (with the link
// `--bandwidth` gives), and both output forms are built.
#include "solve_command.hpp"

#include "fuzz_input.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace {

remat::io::chain_file fixed_chain() {
  remat::io::chain_file f;
  f.name = "fuzz";
  f.time_unit = "ms";
  f.memory_unit = "bytes";
  f.chain.input_size = 1000;
  f.chain.loss_time = 0.5;
  f.chain.stages = {{1.0, 2.0, 4000, 9000, 0, 4000},
                    {3.0, 6.0, 1000, 1000, 2000, 0},
                    {0.5, 1.0, 2000, 5000, 0, 0},
                    {2.0, 2.0, 3000, 8000, 1000, 3000}};
  f.stage_names = {"conv", "", "relu", "fc"};
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string_view> args;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (std::size_t start = 0; start <= text.size() && args.size() < 16;) {
    const std::size_t end = std::min(text.find('\0', start), text.size());
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  remat::tools::solve_request req;
  try {
    req = remat::tools::parse_arguments(std::span<const std::string_view>(args));
  } catch (const remat::tools::usage_error&) {
    return 0;
  }
  if (req.what != remat::tools::command::solve) return 0;
  static const remat::io::chain_file fixed = fixed_chain();
  remat::io::chain_file file = fixed;
  if (req.bandwidth) {
    try {
      remat::tools::set_transfer(file.chain, *req.bandwidth, file.time_unit, file.memory_unit);
    } catch (const remat::tools::bandwidth_error&) {
      return 0;
    }
  }
  remat::tools::solve_report rep;
  try {
    rep = remat::tools::compute_report(file, req);
  } catch (const remat::solver_error&) {
    return 0;
  }
  if (rep.result.feasible && !rep.replayed.fits(req.budget))
    remat::fuzz::fail("remat-solve reports a schedule that does not fit its budget");
  if (remat::tools::format_json(rep).empty() || remat::tools::format_report(rep).empty())
    remat::fuzz::fail("an empty report");
  return 0;
}
