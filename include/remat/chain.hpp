// The plain chain types, and the validation that turns any `chain_like` into one.
#pragma once

#include <remat/concepts.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <vector>

namespace remat {

/// One way to run a stage's recording forward F_all(k, o) and its backward B(k) (docs/model.md,
/// "Several options per stage"): the times and overheads of both, and the size of the tape it
/// leaves (>= the stage's output_size). `forward_overhead` is the transient of F_all(k, o).
struct stage_option {
  double forward_time = 0;
  double backward_time = 0;
  size_type tape_size = 0;
  size_type forward_overhead = 0;
  size_type backward_overhead = 0;

  friend constexpr bool operator==(const stage_option&, const stage_option&) = default;
};

/// The largest number of options a stage may list (an op names its option in 16 bits).
inline constexpr std::size_t max_options = std::size_t{1} << 16;

/// One stage's costs, for users without a type of their own (see concepts.hpp for meanings).
/// `recording_overhead` is the overhead of a recording forward F_all when it differs from
/// `forward_overhead` (that of F_none and F_ck); empty, it is `forward_overhead`
/// (docs/recording-overhead.md). Read it through `remat::recording_overhead(s)`.
///
/// `options`, where not empty, are the ways to run F_all and B (docs/model.md): the stage has
/// those and no other, and its own `backward_time`, `tape_size`, `backward_overhead` and
/// `recording_overhead` are not read by solvers or the simulator (a file may keep them for
/// readers that know no options); `forward_time` and `forward_overhead` stay those of F_none and
/// F_ck. Empty, the stage has one option made of its own fields (`option_at(s, 0)`).
struct stage {
  double forward_time = 0;
  double backward_time = 0;
  size_type output_size = 0;
  size_type tape_size = 0;
  size_type forward_overhead = 0;
  size_type backward_overhead = 0;
  std::optional<size_type> recording_overhead{};
  std::vector<stage_option> options{};

  /// Equal costs: an empty `recording_overhead` equals one holding `forward_overhead`.
  friend constexpr bool operator==(const stage& a, const stage& b) {
    return a.forward_time == b.forward_time && a.backward_time == b.backward_time &&
           a.output_size == b.output_size && a.tape_size == b.tape_size &&
           a.forward_overhead == b.forward_overhead &&
           a.backward_overhead == b.backward_overhead &&
           a.recording_overhead.value_or(a.forward_overhead) ==
               b.recording_overhead.value_or(b.forward_overhead) &&
           a.options == b.options;
  }
};

/// How many options stage `s` has: its list's length, or 1 (its own fields) where it lists none.
constexpr std::size_t option_count(const stage& s) noexcept {
  return s.options.empty() ? 1 : s.options.size();
}

/// Option `o` of `s` (`o < option_count(s)`): the listed one, or, where the stage lists none,
/// the one made of its own fields (its recording overhead as the option's forward overhead).
constexpr stage_option option_at(const stage& s, std::size_t o) noexcept {
  if (!s.options.empty()) return s.options[o];
  return {s.forward_time, s.backward_time, s.tape_size,
          s.recording_overhead.value_or(s.forward_overhead), s.backward_overhead};
}

/// The link between device and host memory (docs/offload.md): bandwidths in memory units per
/// time unit of the chain. Moving a tensor of size s takes s / offload_bandwidth device-to-host,
/// s / prefetch_bandwidth host-to-device; 0 makes that direction unavailable.
struct transfer_rates {
  double offload_bandwidth = 0;
  double prefetch_bandwidth = 0;

  /// Both directions available: schedules may offload tensors and bring them back.
  [[nodiscard]] constexpr bool available() const noexcept {
    return offload_bandwidth > 0 && prefetch_bandwidth > 0;
  }
  friend constexpr bool operator==(const transfer_rates&, const transfer_rates&) = default;
};

/// A chain of stages followed by a loss, with the link to host memory where it has one. Models
/// `chain_like`.
struct chain {
  std::vector<stage> stages;
  size_type input_size = 0;
  double loss_time = 0;
  size_type loss_overhead = 0;
  transfer_rates transfer{};

  [[nodiscard]] constexpr std::size_t length() const noexcept { return stages.size(); }
  [[nodiscard]] constexpr double offload_bandwidth() const noexcept {
    return transfer.offload_bandwidth;
  }
  [[nodiscard]] constexpr double prefetch_bandwidth() const noexcept {
    return transfer.prefetch_bandwidth;
  }
  friend constexpr bool operator==(const chain&, const chain&) = default;
};

/// The largest single size a chain may declare: 2^62.
inline constexpr size_type max_size = size_type{1} << 62;

/// A chain whose values break the model: names the stage (if any), the field and the rule.
/// `what()` reads like `stages[3].tape_size: must be >= output_size (12 < 40)`.
class chain_error : public std::invalid_argument {
 public:
  static constexpr std::size_t no_stage = static_cast<std::size_t>(-1);

  chain_error(std::size_t stage_index, std::string field, const std::string& rule)
      : std::invalid_argument(location(stage_index, field) + ": " + rule),
        stage_index_(stage_index),
        field_(std::move(field)) {}

  /// Index of the offending stage, or `no_stage` for a chain-level field.
  [[nodiscard]] std::size_t stage_index() const noexcept { return stage_index_; }
  /// The field's name as in the chain file: `tape_size`, `input_size`, `loss.backward_time`, ...
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  static std::string location(std::size_t stage_index, const std::string& field) {
    if (stage_index == no_stage) return field;
    return "stages[" + std::to_string(stage_index) + "]." + field;
  }
  std::size_t stage_index_;
  std::string field_;
};

namespace detail {

[[noreturn]] inline void throw_chain_error(std::size_t stage_index, const char* field,
                                           const std::string& rule) {
  throw chain_error(stage_index, field, rule);
}

// A field of option `o` of a stage: `options[1].tape_size`.
[[noreturn]] inline void throw_option_error(std::size_t stage_index, std::size_t o,
                                            const char* field, const std::string& rule) {
  throw chain_error(stage_index, "options[" + std::to_string(o) + "]." + field, rule);
}

// Times must be finite and non-negative. `t - t == 0` is false exactly for NaN and infinities,
// and unlike std::isfinite it is usable in constant expressions.
template <class T>
constexpr double checked_time(T value, std::size_t stage_index, const char* field) {
  const auto t = static_cast<double>(value);
  if (!(t - t == 0)) throw_chain_error(stage_index, field, "must be a finite number");
  if (t < 0) throw_chain_error(stage_index, field, "must be >= 0 (" + std::to_string(t) + ")");
  return t;
}

template <class T>
constexpr size_type checked_size(T value, std::size_t stage_index, const char* field) {
  if constexpr (std::is_signed_v<T>) {
    if (value < 0)
      throw_chain_error(stage_index, field, "must be >= 0 (" + std::to_string(value) + ")");
  }
  if (static_cast<std::uintmax_t>(value) > static_cast<std::uintmax_t>(max_size))
    throw_chain_error(stage_index, field, "must be <= 2^62 (" + std::to_string(value) + ")");
  return static_cast<size_type>(value);
}

// The checks of `checked_time` and `checked_size` on a field of option `o` of a stage.
template <class T>
constexpr double checked_option_time(T value, std::size_t stage_index, std::size_t o,
                                     const char* field) {
  const auto t = static_cast<double>(value);
  if (!(t - t == 0)) throw_option_error(stage_index, o, field, "must be a finite number");
  if (t < 0)
    throw_option_error(stage_index, o, field, "must be >= 0 (" + std::to_string(t) + ")");
  return t;
}

template <class T>
constexpr size_type checked_option_size(T value, std::size_t stage_index, std::size_t o,
                                        const char* field) {
  if constexpr (std::is_signed_v<T>) {
    if (value < 0)
      throw_option_error(stage_index, o, field, "must be >= 0 (" + std::to_string(value) + ")");
  }
  if (static_cast<std::uintmax_t>(value) > static_cast<std::uintmax_t>(max_size))
    throw_option_error(stage_index, o, field,
                       "must be <= 2^62 (" + std::to_string(value) + ")");
  return static_cast<size_type>(value);
}

// Adds `v` to `total`, failing when the total memory of the chain no longer fits in 64 bits.
constexpr void add_checked(size_type& total, size_type v, std::size_t stage_index,
                           const char* field) {
  if (total > std::numeric_limits<size_type>::max() - v)
    throw_chain_error(stage_index, field,
                      "the chain's total memory (all activations, tapes, gradients and the "
                      "largest overhead) overflows 64 bits");
  total += v;
}

}  // namespace detail

/// Checks every value of `c` against the model; throws `chain_error` naming the first bad one.
/// The checks: at least one stage; times finite and >= 0; sizes >= 0 and <= 2^62;
/// tape_size >= output_size; each option's (`options[o]`) times and sizes likewise, its
/// tape_size >= the stage's output_size, at most `max_options` options; the chain's total memory
/// (input, every output twice for the activation and its gradient, every stage's largest tape,
/// the largest overhead) fits in a signed 64-bit integer,
/// so that no memory figure a solver or the simulator computes can overflow; and
/// (L + 1) * sum(forward_time) + sum(backward_time) + loss, each stage's times the largest of its
/// own and its options', is finite, a bound on the time of any
/// schedule a solver returns (no stage is run forward more than L + 1 times by a persistent
/// schedule), so no makespan overflows a double.
constexpr void validate(const chain& c) {
  using detail::throw_chain_error;
  if (c.stages.empty()) throw_chain_error(chain_error::no_stage, "stages", "must not be empty");
  detail::checked_size(c.input_size, chain_error::no_stage, "input_size");
  detail::checked_time(c.loss_time, chain_error::no_stage, "loss.backward_time");
  detail::checked_size(c.loss_overhead, chain_error::no_stage, "loss.backward_overhead");
  size_type total = 0;
  size_type largest_overhead = c.loss_overhead;
  detail::add_checked(total, c.input_size, chain_error::no_stage, "input_size");
  detail::add_checked(total, c.input_size, chain_error::no_stage, "input_size");
  for (std::size_t k = 0; k < c.stages.size(); ++k) {
    const stage& s = c.stages[k];
    detail::checked_time(s.forward_time, k, "forward_time");
    detail::checked_time(s.backward_time, k, "backward_time");
    detail::checked_size(s.output_size, k, "output_size");
    detail::checked_size(s.tape_size, k, "tape_size");
    detail::checked_size(s.forward_overhead, k, "forward_overhead");
    detail::checked_size(s.backward_overhead, k, "backward_overhead");
    if (s.recording_overhead) detail::checked_size(*s.recording_overhead, k, "recording_overhead");
    if (s.tape_size < s.output_size)
      throw_chain_error(k, "tape_size",
                        "must be >= output_size (" + std::to_string(s.tape_size) + " < " +
                            std::to_string(s.output_size) + ")");
    if (s.options.size() > max_options)
      throw_chain_error(k, "options",
                        "must list at most 65536 options (" + std::to_string(s.options.size()) +
                            ")");
    size_type largest_tape = s.tape_size;
    for (std::size_t o = 0; o < s.options.size(); ++o) {
      const stage_option& p = s.options[o];
      detail::checked_option_time(p.forward_time, k, o, "forward_time");
      detail::checked_option_time(p.backward_time, k, o, "backward_time");
      detail::checked_option_size(p.tape_size, k, o, "tape_size");
      detail::checked_option_size(p.forward_overhead, k, o, "forward_overhead");
      detail::checked_option_size(p.backward_overhead, k, o, "backward_overhead");
      if (p.tape_size < s.output_size)
        detail::throw_option_error(k, o, "tape_size",
                                   "must be >= output_size (" + std::to_string(p.tape_size) +
                                       " < " + std::to_string(s.output_size) + ")");
      largest_tape = std::max(largest_tape, p.tape_size);
      largest_overhead = std::max({largest_overhead, p.forward_overhead, p.backward_overhead});
    }
    detail::add_checked(total, s.output_size, k, "output_size");
    detail::add_checked(total, s.output_size, k, "output_size");
    detail::add_checked(total, largest_tape, k, "tape_size");
    largest_overhead = std::max({largest_overhead, s.forward_overhead, s.backward_overhead,
                                 s.recording_overhead.value_or(0)});
  }
  detail::add_checked(total, largest_overhead, chain_error::no_stage, "overheads");

  // Bandwidths: finite and >= 0, and large enough that moving the chain's whole memory L + 1
  // times takes a finite time (no transfer time or makespan overflows a double).
  const auto moves = static_cast<double>(c.stages.size() + 1) * static_cast<double>(total);
  auto check_bandwidth = [&](double bw, const char* field) {
    detail::checked_time(bw, chain_error::no_stage, field);
    if (bw > 0 && !(moves / bw - moves / bw == 0))
      throw_chain_error(chain_error::no_stage, field,
                        "is too small: moving the chain's memory at this rate overflows the "
                        "time (" + std::to_string(bw) + ")");
  };
  check_bandwidth(c.transfer.offload_bandwidth, "transfer.offload_bandwidth");
  check_bandwidth(c.transfer.prefetch_bandwidth, "transfer.prefetch_bandwidth");

  const auto repeats = static_cast<double>(c.stages.size() + 1);
  double time = c.loss_time;
  for (std::size_t k = 0; k < c.stages.size(); ++k) {
    double forward = c.stages[k].forward_time;
    double backward = c.stages[k].backward_time;
    for (const stage_option& p : c.stages[k].options) {
      forward = std::max(forward, p.forward_time);
      backward = std::max(backward, p.backward_time);
    }
    time += repeats * forward + backward;
    if (!(time - time == 0))
      throw_chain_error(k, "forward_time",
                        "the chain's times are too large: (L + 1) x the forward times plus the "
                        "backward times overflows a double");
  }
}

/// Copies any `chain_like` into a `chain`, checking every value (see `validate`).
template <chain_like C>
constexpr chain to_chain(const C& c) {
  if constexpr (std::same_as<C, chain>) {
    validate(c);
    return c;
  } else {
    chain out;
    const auto& range = remat::stages(c);
    out.stages.reserve(static_cast<std::size_t>(std::ranges::size(range)));
    std::size_t k = 0;
    for (const auto& s : range) {
      stage st;
      st.forward_time = detail::checked_time(remat::forward_time(s), k, "forward_time");
      st.backward_time = detail::checked_time(remat::backward_time(s), k, "backward_time");
      st.output_size = detail::checked_size(remat::output_size(s), k, "output_size");
      st.tape_size = detail::checked_size(remat::tape_size(s), k, "tape_size");
      st.forward_overhead = detail::checked_size(remat::forward_overhead(s), k, "forward_overhead");
      st.backward_overhead =
          detail::checked_size(remat::backward_overhead(s), k, "backward_overhead");
      // Kept only where it differs: a chain without recording overheads copies to one without.
      const size_type recording =
          detail::checked_size(remat::recording_overhead(s), k, "recording_overhead");
      if (recording != st.forward_overhead) st.recording_overhead = recording;
      if constexpr (std::is_invocable_v<decltype(remat::stage_options), const decltype(s)&>) {
        const auto& listed = remat::stage_options(s);
        if (static_cast<std::size_t>(std::ranges::size(listed)) > max_options)
          detail::throw_chain_error(k, "options", "must list at most 65536 options");
        std::size_t o = 0;
        for (const auto& p : listed) {
          st.options.push_back(
              {detail::checked_option_time(remat::forward_time(p), k, o, "forward_time"),
               detail::checked_option_time(remat::backward_time(p), k, o, "backward_time"),
               detail::checked_option_size(remat::tape_size(p), k, o, "tape_size"),
               detail::checked_option_size(remat::forward_overhead(p), k, o, "forward_overhead"),
               detail::checked_option_size(remat::backward_overhead(p), k, o,
                                           "backward_overhead")});
          ++o;
        }
      }
      out.stages.push_back(std::move(st));
      ++k;
    }
    out.input_size =
        detail::checked_size(remat::input_size(c), chain_error::no_stage, "input_size");
    out.loss_time =
        detail::checked_time(remat::loss_time(c), chain_error::no_stage, "loss.backward_time");
    out.loss_overhead = detail::checked_size(remat::loss_overhead(c), chain_error::no_stage,
                                             "loss.backward_overhead");
    out.transfer.offload_bandwidth = detail::checked_time(
        remat::offload_bandwidth(c), chain_error::no_stage, "transfer.offload_bandwidth");
    out.transfer.prefetch_bandwidth = detail::checked_time(
        remat::prefetch_bandwidth(c), chain_error::no_stage, "transfer.prefetch_bandwidth");
    validate(out);
    return out;
  }
}

}  // namespace remat
