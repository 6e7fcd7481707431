// Random chains for property tests: small integer sizes (zeros included), overheads up to twice
// the tape, times with a few distinct values so that ties happen. Recording overheads
// (docs/recording-overhead.md): a third of the stages give none (fa = ft), the others one drawn
// below or above the forward overhead, so every property test runs both.
#pragma once

#include <remat/chain.hpp>

#include <cstdint>
#include <random>

namespace remat::testing {

struct random_chain_options {
  int min_stages = 1;
  int max_stages = 8;
  size_type max_size = 10;  // outputs in 0..max_size, tapes in output..output+max_size
  bool overheads = true;    // overheads in 0..2*tape
  bool recording_overheads = true;  // with overheads: fa != ft at about 2/3 of the stages
};

inline chain random_chain(std::mt19937_64& rng, const random_chain_options& o = {}) {
  auto uniform = [&](size_type lo, size_type hi) {
    return std::uniform_int_distribution<size_type>(lo, hi)(rng);
  };
  auto time = [&] { return static_cast<double>(uniform(0, 8)) * 0.5; };
  chain c;
  const auto n = static_cast<std::size_t>(uniform(o.min_stages, o.max_stages));
  c.input_size = uniform(0, o.max_size);
  for (std::size_t k = 0; k < n; ++k) {
    stage s;
    s.forward_time = time();
    s.backward_time = time();
    s.output_size = uniform(0, o.max_size);
    s.tape_size = s.output_size + uniform(0, o.max_size);
    if (o.overheads) {
      s.forward_overhead = uniform(0, 2 * s.tape_size);
      s.backward_overhead = uniform(0, 2 * s.tape_size);
      if (o.recording_overheads) {
        // None, one at or below ft (the usual case: a recording forward keeps what a no-grad one
        // holds as a transient), or one anywhere up to twice the tape.
        const auto pick = uniform(0, 2);
        if (pick == 1) s.recording_overhead = uniform(0, s.forward_overhead);
        if (pick == 2) s.recording_overhead = uniform(0, 2 * s.tape_size);
      }
    }
    c.stages.push_back(s);
  }
  c.loss_time = time();
  c.loss_overhead = o.overheads ? uniform(0, o.max_size) : 0;
  return c;
}

// Gives each stage of `c` 1 to `most` options (docs/model.md, "Several options per stage"): about
// a third of the stages keep none (their own fields), the others list theirs. Each option's
// tape lies in output..output+max_size, its overheads up to twice its tape, its times like
// random_chain's; with `same_forward`, every F_all(k, o) takes the stage's own forward_time.
inline void add_random_options(std::mt19937_64& rng, chain& c, int most, size_type max_size = 10,
                               bool same_forward = false) {
  auto uniform = [&](size_type lo, size_type hi) {
    return std::uniform_int_distribution<size_type>(lo, hi)(rng);
  };
  auto time = [&] { return static_cast<double>(uniform(0, 8)) * 0.5; };
  for (stage& s : c.stages) {
    if (uniform(0, 2) == 0) continue;
    const auto count = static_cast<std::size_t>(uniform(1, most));
    for (std::size_t o = 0; o < count; ++o) {
      stage_option p;
      p.forward_time = same_forward ? s.forward_time : time();
      p.backward_time = time();
      p.tape_size = s.output_size + uniform(0, max_size);
      p.forward_overhead = uniform(0, 2 * p.tape_size);
      p.backward_overhead = uniform(0, 2 * p.tape_size);
      s.options.push_back(p);
    }
  }
}

}  // namespace remat::testing
