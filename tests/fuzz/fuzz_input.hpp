// Turning a fuzzer's bytes into values: a reader that yields 0 once the bytes run out, and the
// hostile values (0, 1, 2^62, 1e300, ...) that byte-sized choices pick among.
#pragma once

#include <remat/chain.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

namespace remat::fuzz {

class byte_reader {
 public:
  byte_reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  [[nodiscard]] bool empty() const { return pos_ >= size_; }
  [[nodiscard]] std::size_t left() const { return empty() ? 0 : size_ - pos_; }

  std::uint8_t byte() { return empty() ? 0 : data_[pos_++]; }

  // A value in 0 .. n-1.
  std::size_t pick(std::size_t n) { return byte() % n; }

  // A size: mostly small (so that budgets and chains interact), sometimes at the edges of the
  // model (2^31, 2^53 + 1, 2^62 - 1, 2^62).
  size_type size() {
    static constexpr size_type edges[] = {size_type{1} << 31, (size_type{1} << 53) + 1,
                                          max_size - 1, max_size, 1000000007};
    const std::uint8_t b = byte();
    if (b < 240) return b % 16;
    return edges[b % 5];
  }

  // A time: small multiples of a half (ties), or an edge (0, 1e-300, a subnormal, 1e300).
  double time() {
    static constexpr double edges[] = {0.0,   1e-300,     std::numeric_limits<double>::denorm_min(),
                                       1e300, 1e15 + 0.5, 0.1};
    const std::uint8_t b = byte();
    if (b < 240) return static_cast<double>(b % 9) * 0.5;
    return edges[b % 6];
  }

  // A chain of 1 .. max_stages stages, not validated: its values may break the model.
  chain make_chain(std::size_t max_stages) {
    chain c;
    const std::size_t n = 1 + pick(max_stages);
    c.input_size = size();
    c.loss_time = time();
    c.loss_overhead = byte() < 192 ? 0 : size();
    for (std::size_t k = 0; k < n; ++k) {
      stage s;
      s.forward_time = time();
      s.backward_time = time();
      s.output_size = size();
      // Mostly a valid tape (>= output), sometimes one below it, which validation must refuse.
      const std::uint8_t t = byte();
      const size_type extra = t < 128 ? 0 : size();
      s.tape_size = t < 8 ? s.output_size - 1
                    : extra > std::numeric_limits<size_type>::max() - s.output_size
                        ? std::numeric_limits<size_type>::max()
                        : s.output_size + extra;
      const std::uint8_t o = byte();
      s.forward_overhead = (o & 1U) != 0 ? size() : 0;
      s.backward_overhead = (o & 2U) != 0 ? size() : 0;
      if ((o & 4U) != 0) s.recording_overhead = size();  // docs/recording-overhead.md
      c.stages.push_back(s);
    }
    return c;
  }

  // make_chain, where the chain passes validation; none where it does not (nothing to check).
  std::optional<chain> valid_chain(std::size_t max_stages) {
    chain c = make_chain(max_stages);
    try {
      validate(c);
    } catch (const chain_error&) {
      return std::nullopt;
    }
    return c;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Stops the fuzzer on a broken property, with the reason on stderr.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "remat fuzz: property broken: %s\n", what);
  std::abort();
}

}  // namespace remat::fuzz
