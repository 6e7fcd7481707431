// remat-solve: the fastest schedule of a chain file for a memory budget (docs/chain-format.md).
// The work is in solve_command.hpp; main only adapts argv and checks that stdout was written.
#include "solve_command.hpp"

#include <unistd.h>

#include <iostream>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
  try {
    const std::vector<std::string_view> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    // Progress only where someone watches it: stderr on a terminal.
    const int status = remat::tools::run_solve(args, std::cout, std::cerr, ::isatty(2) == 1);
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "remat-solve: cannot write the output\n";
      return 2;
    }
    return status;
  } catch (...) {  // only allocating the argument list can get here
    return 2;
  }
}
