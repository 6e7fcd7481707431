// A chain as one line of text, for failure messages of property tests (pass it to INFO).
#pragma once

#include <remat/chain.hpp>

#include <cstddef>
#include <sstream>
#include <string>

namespace remat::testing {

/// `input 3, loss 1.5/2, stages [fw bw x xb ft bt fa?]: [1 0.5 2 4 0 3] [1 1 2 2 5 0 fa=1] [...]`
/// (fa only where a stage gives a recording overhead; `opts` only where it lists options, each
/// `fw bw xb fa bt`)
inline std::string chain_text(const chain& c) {
  std::ostringstream out;
  out << "input " << c.input_size << ", loss " << c.loss_time << '/' << c.loss_overhead
      << ", stages [fw bw x xb ft bt fa?]:";
  for (const stage& s : c.stages) {
    out << " [" << s.forward_time << ' ' << s.backward_time << ' ' << s.output_size << ' '
        << s.tape_size << ' ' << s.forward_overhead << ' ' << s.backward_overhead
        << (s.recording_overhead ? " fa=" + std::to_string(*s.recording_overhead) : "");
    if (!s.options.empty()) {
      out << " opts=";
      for (std::size_t o = 0; o < s.options.size(); ++o)
        out << (o == 0 ? "{" : ";") << s.options[o].forward_time << ' '
            << s.options[o].backward_time << ' ' << s.options[o].tape_size << ' '
            << s.options[o].forward_overhead << ' ' << s.options[o].backward_overhead;
      out << '}';
    }
    out << ']';
  }
  return out.str();
}

}  // namespace remat::testing
