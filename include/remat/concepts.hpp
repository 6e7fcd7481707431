// How user types plug into remat: customization points and the concepts built on them.
//
// Every customization point below is an `inline constexpr` function object. For an argument `s`
// it tries, in order:
//   1. a member function `s.NAME()`,
//   2. a data member `s.NAME`,
//   3. a free function `NAME(s)` found by argument-dependent lookup,
// and uses the first that exists. The optional ones (marked *) fall back to 0; the one marked **
// falls back to another point (named beside it).
//
// Stage costs (docs/model.md, stage k):
//   forward_time(s)       fw[k]   seconds, milliseconds, ...: any unit, the same for all stages
//   backward_time(s)      bw[k]
//   output_size(s)        x[k+1]  integral, in bytes or any memory unit
//   tape_size(s)          xb[k+1] integral, >= output_size
//   forward_overhead(s)*  ft[k]   integral
//   recording_overhead(s)** fa[k] integral: the overhead of a recording forward F_all(k), when it
//                         differs from that of F_none/F_ck (docs/recording-overhead.md); falls back
//                         to forward_overhead(s). A std::optional value counts only when it holds
//                         one (remat::stage's field is one).
//   backward_overhead(s)* bt[k]   integral
//   stage_options(s)      the stage's options (docs/model.md, "Several options per stage"): a
//                         sized forward range of option types, each read through forward_time,
//                         backward_time, tape_size, forward_overhead* and backward_overhead* above
//                         (fw_o, bw_o, xb_o, ft_o, bt_o of F_all(k, o) and B(k)). Looked up as a
//                         member function `s.options()`, a data member `s.options`, or a free
//                         function `stage_options(s)` found by ADL. Optional: without it, or with
//                         an empty range, the stage has one option made of its own fields.
//
// Chain (a sized range of stages, an input and a loss):
//   stages(c)             a sized forward range whose elements model `stage_like`
//   input_size(c)         x[0], integral
//   loss_time(c)*         bw[L]
//   loss_overhead(c)*     bt[L], integral
//   offload_bandwidth(c)* device-to-host bandwidth, memory units per time unit (docs/offload.md);
//                         0 (the fallback): no offloading
//   prefetch_bandwidth(c)* host-to-device bandwidth; 0: no prefetching
//
// `stage_like<S>` and `chain_like<C>` are the concepts every remat algorithm takes.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>

namespace remat {

/// Memory sizes: bytes, or any integral unit. Signed so that budget arithmetic cannot wrap.
using size_type = std::int64_t;

namespace detail::cpo {

// The character types. signed and unsigned char are not among them: they are std::int8_t and
// std::uint8_t.
template <class T>
concept character_type = std::same_as<T, char> || std::same_as<T, wchar_t> ||
    std::same_as<T, char8_t> || std::same_as<T, char16_t> || std::same_as<T, char32_t>;

// A value usable as a size: an integer type other than bool and the character types.
template <class T>
concept size_value =
    std::integral<std::remove_cvref_t<T>> && !std::same_as<std::remove_cvref_t<T>, bool> &&
    !character_type<std::remove_cvref_t<T>>;

// A value usable as a time: any arithmetic type other than bool.
template <class T>
concept time_value =
    std::is_arithmetic_v<std::remove_cvref_t<T>> && !std::same_as<std::remove_cvref_t<T>, bool>;

// Defines the customization point object NAME. Lookup order: member function, data member, ADL.
// The deleted declaration is the poison pill: it hides `remat::NAME` from unqualified lookup so
// only ADL can find a user's free function.
#define REMAT_DETAIL_CPO(NAME)                                              \
  namespace NAME##_ns {                                                     \
    void NAME() = delete;                                                   \
    template <class T>                                                      \
    concept has_member_fn = requires(const T& t) {                          \
      t.NAME();                                                             \
    };                                                                      \
    template <class T>                                                      \
    concept has_member_data = requires(const T& t) {                        \
      t.NAME;                                                               \
    };                                                                      \
    template <class T>                                                      \
    concept has_adl = requires(const T& t) {                                \
      NAME(t);                                                              \
    };                                                                      \
    template <class T>                                                      \
    concept has_mutable_member_fn = requires(T & t) {                       \
      t.NAME();                                                             \
    };                                                                      \
    template <class T>                                                      \
    concept has_mutable_adl = requires(T & t) {                             \
      NAME(t);                                                              \
    };                                                                      \
    struct fn {                                                             \
      /* false when T has a NAME that only a non-const T can call */        \
      template <class T>                                                    \
      static constexpr bool callable_on_const() {                           \
        if constexpr (has_member_fn<T> || has_member_data<T> || has_adl<T>) \
          return true;                                                      \
        else                                                                \
          return !has_mutable_member_fn<T> && !has_mutable_adl<T>;          \
      }                                                                     \
      template <class T>                                                    \
      requires has_member_fn<T> || has_member_data<T> || has_adl<T>         \
      constexpr decltype(auto) operator()(const T& t) const {               \
        if constexpr (has_member_fn<T>)                                     \
          return t.NAME();                                                  \
        else if constexpr (has_member_data<T>)                              \
          return (t.NAME);                                                  \
        else                                                                \
          return NAME(t);                                                   \
      }                                                                     \
    };                                                                      \
  }

REMAT_DETAIL_CPO(forward_time)
REMAT_DETAIL_CPO(backward_time)
REMAT_DETAIL_CPO(output_size)
REMAT_DETAIL_CPO(tape_size)
REMAT_DETAIL_CPO(forward_overhead)
REMAT_DETAIL_CPO(recording_overhead)
REMAT_DETAIL_CPO(backward_overhead)
REMAT_DETAIL_CPO(stages)
REMAT_DETAIL_CPO(input_size)
REMAT_DETAIL_CPO(loss_time)
REMAT_DETAIL_CPO(loss_overhead)
REMAT_DETAIL_CPO(offload_bandwidth)
REMAT_DETAIL_CPO(prefetch_bandwidth)

#undef REMAT_DETAIL_CPO

// The options of a stage: looked up as `s.options()`, `s.options`, or ADL `stage_options(s)`
// (the member is named `options`, as remat::stage's; the function object is `stage_options`, so
// that parameters named `options` do not shadow it).
namespace stage_options_ns {
void stage_options() = delete;
template <class T>
concept has_member_fn = requires(const T& t) {
  t.options();
};
template <class T>
concept has_member_data = requires(const T& t) {
  t.options;
};
template <class T>
concept has_adl = requires(const T& t) {
  stage_options(t);
};
struct fn {
  template <class T>
  requires has_member_fn<T> || has_member_data<T> || has_adl<T>
  constexpr decltype(auto) operator()(const T& t) const {
    if constexpr (has_member_fn<T>)
      return t.options();
    else if constexpr (has_member_data<T>)
      return (t.options);
    else
      return stage_options(t);
  }
};
}  // namespace stage_options_ns

// An optional customization point: the user's value when one is provided, else 0. A member or
// free function of the point's name that cannot be called on a const object is an error, not a
// silent 0.
template <class Required>
struct optional_fn {
  template <class T>
  constexpr auto operator()(const T& t) const {
    static_assert(Required::template callable_on_const<T>(),
                  "remat: this type has a forward_overhead, backward_overhead, loss_time, "
                  "loss_overhead, offload_bandwidth or prefetch_bandwidth (named in the "
                  "instantiation above) that cannot be called on a "
                  "const object, so remat would read it as 0: make the member function const, or "
                  "take the free function's argument by const reference");
    if constexpr (std::is_invocable_v<const Required&, const T&>)
      return Required{}(t);
    else
      return 0;
  }
};

template <class T>
struct is_std_optional : std::false_type {};
template <class T>
struct is_std_optional<std::optional<T>> : std::true_type {};

// An optional customization point whose fallback is another one: the user's value when one is
// provided (an empty std::optional provides none), else `Fallback{}(t)`.
template <class Required, class Fallback>
struct fallback_fn {
  template <class T>
  constexpr auto operator()(const T& t) const {
    static_assert(Required::template callable_on_const<T>(),
                  "remat: this type has a recording_overhead (named in the instantiation above) "
                  "that cannot be called on a const object, so remat would read it as the "
                  "forward_overhead: make the member function const, or take the free function's "
                  "argument by const reference");
    if constexpr (std::is_invocable_v<const Required&, const T&>) {
      using R = std::remove_cvref_t<std::invoke_result_t<const Required&, const T&>>;
      if constexpr (is_std_optional<R>::value) {
        using V = std::common_type_t<typename R::value_type,
                                     std::invoke_result_t<const Fallback&, const T&>>;
        const R& v = Required{}(t);
        return v.has_value() ? static_cast<V>(*v) : static_cast<V>(Fallback{}(t));
      } else {
        return Required{}(t);
      }
    } else {
      return Fallback{}(t);
    }
  }
};

}  // namespace detail::cpo

inline constexpr detail::cpo::forward_time_ns::fn forward_time{};
inline constexpr detail::cpo::backward_time_ns::fn backward_time{};
inline constexpr detail::cpo::output_size_ns::fn output_size{};
inline constexpr detail::cpo::tape_size_ns::fn tape_size{};
inline constexpr detail::cpo::optional_fn<detail::cpo::forward_overhead_ns::fn> forward_overhead{};
inline constexpr detail::cpo::fallback_fn<
    detail::cpo::recording_overhead_ns::fn,
    detail::cpo::optional_fn<detail::cpo::forward_overhead_ns::fn>>
    recording_overhead{};
inline constexpr detail::cpo::optional_fn<detail::cpo::backward_overhead_ns::fn>
    backward_overhead{};
inline constexpr detail::cpo::stage_options_ns::fn stage_options{};
inline constexpr detail::cpo::stages_ns::fn stages{};
inline constexpr detail::cpo::input_size_ns::fn input_size{};
inline constexpr detail::cpo::optional_fn<detail::cpo::loss_time_ns::fn> loss_time{};
inline constexpr detail::cpo::optional_fn<detail::cpo::loss_overhead_ns::fn> loss_overhead{};
inline constexpr detail::cpo::optional_fn<detail::cpo::offload_bandwidth_ns::fn>
    offload_bandwidth{};
inline constexpr detail::cpo::optional_fn<detail::cpo::prefetch_bandwidth_ns::fn>
    prefetch_bandwidth{};

/// A type that describes one option of a stage: two times and a tape size, plus optional
/// overheads (those of F_all(k, o) and B(k)).
template <class O>
concept stage_option_like = requires(const O& o) {
  { remat::forward_time(o) } -> detail::cpo::time_value;
  { remat::backward_time(o) } -> detail::cpo::time_value;
  { remat::tape_size(o) } -> detail::cpo::size_value;
  { remat::forward_overhead(o) } -> detail::cpo::size_value;
  { remat::backward_overhead(o) } -> detail::cpo::size_value;
};

namespace detail {
// No options, or a sized forward range of `stage_option_like` ones.
template <class S>
concept options_fit = !std::is_invocable_v<decltype(remat::stage_options), const S&> || requires(
    const S& s) {
  requires std::ranges::forward_range<decltype(remat::stage_options(s))>;
  requires std::ranges::sized_range<decltype(remat::stage_options(s))>;
  requires stage_option_like<
      std::ranges::range_value_t<std::remove_cvref_t<decltype(remat::stage_options(s))>>>;
};
}  // namespace detail

/// A type that describes one stage's costs: two times and two sizes, plus optional overheads and
/// options.
template <class S>
concept stage_like = detail::options_fit<S> && requires(const S& s) {
  { remat::forward_time(s) } -> detail::cpo::time_value;
  { remat::backward_time(s) } -> detail::cpo::time_value;
  { remat::output_size(s) } -> detail::cpo::size_value;
  { remat::tape_size(s) } -> detail::cpo::size_value;
  { remat::forward_overhead(s) } -> detail::cpo::size_value;
  { remat::recording_overhead(s) } -> detail::cpo::size_value;
  { remat::backward_overhead(s) } -> detail::cpo::size_value;
};

/// A sized range of stages.
template <class R>
concept stage_range = std::ranges::forward_range<R> && std::ranges::sized_range<R> &&
    stage_like<std::ranges::range_value_t<R>>;

namespace detail {
template <class C>
concept chain_members = requires(const C& c) {
  remat::stages(c);
  { remat::input_size(c) } -> cpo::size_value;
  { remat::loss_time(c) } -> cpo::time_value;
  { remat::loss_overhead(c) } -> cpo::size_value;
  { remat::offload_bandwidth(c) } -> cpo::time_value;
  { remat::prefetch_bandwidth(c) } -> cpo::time_value;
};
template <class C>
using stages_result_t = decltype(remat::stages(std::declval<const C&>()));
}  // namespace detail

/// A type that describes a whole chain: its stages, the input size, and (optionally) the loss.
/// (`stage_range` is a conjunct of its own, not a requirement inside `chain_members`, so that g++
/// names `stage_like` too when a stage type does not model it, as clang++ does.)
template <class C>
concept chain_like = detail::chain_members<C> && stage_range<detail::stages_result_t<C>>;

}  // namespace remat
