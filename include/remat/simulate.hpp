// The simulator: replays any op sequence on a chain exactly by docs/model.md's op table, with
// F_all's peak held + recording_overhead (docs/recording-overhead.md; forward_overhead where none
// is given).
//
// It is the judge of every solver: a schedule is valid when every op finds its inputs held and
// its output not yet held, the sequence ends exactly when g_0 is produced, and it fits a budget
// when no op's peak exceeds it.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace remat {

/// Why an op cannot run.
enum class replay_error : std::uint8_t {
  none,                 ///< the schedule is valid
  bad_kind,             ///< the op's kind is none of the five of docs/model.md
  bad_stage,            ///< the op's stage index is outside 0..L-1 (or, for loss, is not L)
  input_missing,        ///< a forward or the loss finds neither a_k nor t_k held
  output_already_held,  ///< the op's output is already held
  gradient_missing,     ///< B(k) finds no g_{k+1}
  tape_missing,         ///< B(k) finds no t_{k+1}
  after_end,            ///< an op after g_0 was produced
  incomplete,           ///< the sequence ends before g_0 is produced
};

/// A tensor of the model: `a_k` (activation), `t_k` (tape) or `g_k` (gradient).
struct tensor_ref {
  char kind = 'a';
  std::int32_t index = 0;
  friend constexpr bool operator==(const tensor_ref&, const tensor_ref&) = default;
};

/// What replaying a sequence found. For an invalid sequence, the figures cover the ops before the
/// first invalid one.
struct replay_result {
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  replay_error error = replay_error::none;
  std::size_t first_invalid = npos;  ///< index of the first invalid op (ops.size() if incomplete)
  tensor_ref tensor{};               ///< the tensor missing or already held, where one is
  double makespan = 0;               ///< sum of the times of the ops replayed
  size_type peak_memory = 0;         ///< largest memory at any moment, the input a_0 included
  std::vector<size_type> memory_after;  ///< memory held after each op
  std::vector<size_type> op_peak;       ///< memory while each op runs (with its overhead)

  [[nodiscard]] constexpr bool valid() const noexcept { return error == replay_error::none; }
  [[nodiscard]] constexpr bool fits(size_type budget) const noexcept {
    return valid() && peak_memory <= budget;
  }
};

namespace detail {

// Replays `ops` on a validated chain. Sizes are used as given.
constexpr replay_result replay(const chain& c, std::span<const op> ops) {
  const auto L = static_cast<std::int32_t>(c.length());
  const auto n = static_cast<std::size_t>(L) + 1;
  auto x = [&](std::int32_t k) {
    return k == 0 ? c.input_size : c.stages[static_cast<std::size_t>(k - 1)].output_size;
  };
  auto xb = [&](std::int32_t k) { return c.stages[static_cast<std::size_t>(k - 1)].tape_size; };
  std::vector<char> a(n, 0), t(n, 0), g(n, 0);  // held? a_k, t_k (k >= 1), g_k
  a[0] = 1;
  size_type held = c.input_size;

  replay_result r;
  r.peak_memory = held;
  r.memory_after.reserve(ops.size());
  r.op_peak.reserve(ops.size());
  auto fail = [&](std::size_t i, replay_error e, tensor_ref tr) {
    r.error = e;
    r.first_invalid = i;
    r.tensor = tr;
    return r;
  };
  auto idx = [](std::int32_t k) { return static_cast<std::size_t>(k); };

  for (std::size_t i = 0; i < ops.size(); ++i) {
    const op o = ops[i];
    if (g[0]) return fail(i, replay_error::after_end, {'g', 0});
    double time = 0;
    size_type peak = 0;
    if (o.kind > op_kind::backward) return fail(i, replay_error::bad_kind, {'a', o.stage});
    if (o.kind == op_kind::loss) {
      if (o.stage != L) return fail(i, replay_error::bad_stage, {'a', o.stage});
      if (!a[idx(L)] && !t[idx(L)]) return fail(i, replay_error::input_missing, {'a', L});
      if (g[idx(L)]) return fail(i, replay_error::output_already_held, {'g', L});
      g[idx(L)] = 1;
      held += x(L);
      peak = held + c.loss_overhead;
      if (a[idx(L)]) {
        a[idx(L)] = 0;
        held -= x(L);
      }
      time = c.loss_time;
    } else {
      const std::int32_t k = o.stage;
      if (k < 0 || k >= L) return fail(i, replay_error::bad_stage, {'a', k});
      const stage& s = c.stages[idx(k)];
      if (o.kind == op_kind::backward) {
        if (!g[idx(k + 1)]) return fail(i, replay_error::gradient_missing, {'g', k + 1});
        if (!t[idx(k + 1)]) return fail(i, replay_error::tape_missing, {'t', k + 1});
        if (!a[idx(k)] && !(k > 0 && t[idx(k)]))
          return fail(i, replay_error::input_missing, {'a', k});
        if (g[idx(k)]) return fail(i, replay_error::output_already_held, {'g', k});
        g[idx(k)] = 1;
        held += x(k);
        peak = held + s.backward_overhead;
        g[idx(k + 1)] = 0;
        t[idx(k + 1)] = 0;
        held -= x(k + 1) + xb(k + 1);
        if (a[idx(k)]) {
          a[idx(k)] = 0;
          held -= x(k);
        }
        time = s.backward_time;
      } else {
        if (!a[idx(k)] && !(k > 0 && t[idx(k)]))
          return fail(i, replay_error::input_missing, {'a', k});
        if (o.kind == op_kind::forward_all) {
          if (t[idx(k + 1)]) return fail(i, replay_error::output_already_held, {'t', k + 1});
          t[idx(k + 1)] = 1;
          held += xb(k + 1);
        } else {
          if (a[idx(k + 1)]) return fail(i, replay_error::output_already_held, {'a', k + 1});
          a[idx(k + 1)] = 1;
          held += x(k + 1);
        }
        peak = held + (o.kind == op_kind::forward_all
                           ? s.recording_overhead.value_or(s.forward_overhead)
                           : s.forward_overhead);
        if (o.kind == op_kind::forward_none && a[idx(k)]) {
          a[idx(k)] = 0;
          held -= x(k);
        }
        time = s.forward_time;
      }
    }
    r.makespan += time;
    r.peak_memory = std::max(r.peak_memory, peak);
    r.op_peak.push_back(peak);
    r.memory_after.push_back(held);
  }
  if (!g[0]) return fail(ops.size(), replay_error::incomplete, {'g', 0});
  return r;
}

}  // namespace detail

/// Replays `ops` on `c` (any `chain_like`; its values are validated first, see `to_chain`).
template <chain_like C>
constexpr replay_result simulate(const C& c, std::span<const op> ops) {
  if constexpr (std::same_as<C, chain>) {
    validate(c);
    return detail::replay(c, ops);
  } else {
    return detail::replay(to_chain(c), ops);
  }
}

template <chain_like C>
constexpr replay_result simulate(const C& c, const schedule& s) {
  return simulate(c, std::span<const op>(s.ops));
}

/// One line saying why a replay failed, e.g. `op 5 (B(2)): needs t_3, which is not held`;
/// `valid` for a valid one.
inline std::string describe(const replay_result& r, std::span<const op> ops) {
  const auto tensor = std::string(1, r.tensor.kind) + "_" + std::to_string(r.tensor.index);
  std::string where = "op " + std::to_string(r.first_invalid);
  if (r.first_invalid < ops.size()) where += " (" + to_string(ops[r.first_invalid]) + ")";
  switch (r.error) {
    case replay_error::none: return "valid";
    case replay_error::bad_kind:
      return "op " + std::to_string(r.first_invalid) + ": its kind (" +
             std::to_string(static_cast<int>(ops[r.first_invalid].kind)) + ") is not an operation";
    case replay_error::bad_stage:
      if (ops[r.first_invalid].kind == op_kind::loss)
        return where + ": the loss carries stage " + std::to_string(r.tensor.index) +
               ", not the chain length";
      return where + ": stage " + std::to_string(r.tensor.index) + " is outside the chain";
    case replay_error::input_missing:
      return where + ": needs " + tensor + (r.tensor.index > 0 ? " (or its tape)" : "") +
             ", which is not held";
    case replay_error::output_already_held:
      return where + ": its output " + tensor + " is already held";
    case replay_error::gradient_missing:
    case replay_error::tape_missing: return where + ": needs " + tensor + ", which is not held";
    case replay_error::after_end: return where + ": g_0 was already produced";
    case replay_error::incomplete:
      return "the schedule ends after " + std::to_string(ops.size()) + " ops without producing g_0";
  }
  return where;
}

}  // namespace remat
