// The model's time grid: times rounded to whole multiples of a power of two q, small enough that
// every sum a DP forms is exact, so that any order of summation gives the same bits.
#include <remat/detail/dp/model.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace unit_detail_dp_model_test {

namespace {

using remat::chain;
using remat::detail::make_model;
using remat::detail::model;

// A chain of `n` stages whose times are arbitrary doubles in [0, scale).
chain rough_chain(std::mt19937_64& rng, std::size_t n, double scale) {
  remat::testing::random_chain_options o;
  o.min_stages = static_cast<int>(n);
  o.max_stages = static_cast<int>(n);
  chain c = remat::testing::random_chain(rng, o);
  std::uniform_real_distribution<double> time(0, scale);
  for (remat::stage& s : c.stages) {
    s.forward_time = time(rng);
    s.backward_time = time(rng);
  }
  c.loss_time = time(rng);
  return c;
}

// bw[k] of a model whose stages have one option each (bw[L]: the loss time).
double bw_of(const model& md, std::size_t k) {
  return k < static_cast<std::size_t>(md.L) ? md.options(static_cast<std::int32_t>(k))[0].bw
                                            : md.loss_time;
}

std::vector<double> all_times(const model& md) {
  std::vector<double> t = md.fw;
  for (std::size_t k = 0; k <= static_cast<std::size_t>(md.L); ++k) t.push_back(bw_of(md, k));
  return t;
}

double sum_in_order(const std::vector<double>& t) {
  double s = 0;
  for (const double v : t) s += v;
  return s;
}

}  // namespace

TEST_CASE("property: times are whole multiples of q, within q / 2, and 8 V <= 2^53 q") {
  std::mt19937_64 rng(71);
  for (int n = 0; n < 300; ++n) {
    const double scale = std::ldexp(1.0, std::uniform_int_distribution<int>(-40, 40)(rng));
    const chain c = rough_chain(rng, 1 + static_cast<std::size_t>(n % 60), scale);
    INFO(remat::testing::chain_text(c));
    const model md = make_model(c, 1);
    REQUIRE(md.exact_sums);
    const double q = md.time_quantum;
    int exponent = 0;
    CHECK(std::frexp(q, &exponent) == 0.5);  // a power of two
    const auto repeats = static_cast<double>(md.L + 1);
    double v = 0;
    for (std::size_t k = 0; k < md.fw.size(); ++k) {
      const double f = k < c.length() ? c.stages[k].forward_time : 0.0;
      const double b = k < c.length() ? c.stages[k].backward_time : c.loss_time;
      CHECK(md.fw[k] / q == std::floor(md.fw[k] / q));
      CHECK(bw_of(md, k) / q == std::floor(bw_of(md, k) / q));
      CHECK(std::fabs(md.fw[k] - f) <= q / 2);
      CHECK(std::fabs(bw_of(md, k) - b) <= q / 2);
      v += repeats * f + b;  // V of the chain's own times, as quantize_times sums it
    }
    CHECK(8 * v <= std::ldexp(q, 53));
    CHECK(8 * v > std::ldexp(q, 52));  // the least such power of two
  }
}

TEST_CASE("property: sums of model times do not depend on their order; of the raw times they do") {
  std::mt19937_64 rng(72);
  int raw_differs = 0;
  for (int n = 0; n < 300; ++n) {
    const chain c = rough_chain(rng, 40, 10.0);
    const model md = make_model(c, 1);
    std::vector<double> t = all_times(md);
    std::vector<double> raw;
    for (const remat::stage& s : c.stages) {
      raw.push_back(s.forward_time);
      raw.push_back(s.backward_time);
    }
    // A branch value sums up to (L + 1) copies of the forward times: repeat them.
    for (std::size_t k = 0; k < md.fw.size(); ++k)
      for (int r = 0; r < md.L; ++r) t.push_back(md.fw[k]);
    const double forward = sum_in_order(t);
    std::shuffle(t.begin(), t.end(), rng);
    CHECK(sum_in_order(t) == forward);
    std::sort(t.begin(), t.end());
    CHECK(sum_in_order(t) == forward);
    const double raw_forward = sum_in_order(raw);
    std::shuffle(raw.begin(), raw.end(), rng);
    raw_differs += sum_in_order(raw) != raw_forward ? 1 : 0;
  }
  CHECK(raw_differs > 100);  // the property is not a given
}

TEST_CASE("times already on the grid are kept: halves, integers, zeros") {
  std::mt19937_64 rng(73);
  for (int n = 0; n < 200; ++n) {
    const chain c = remat::testing::random_chain(rng);  // times in {0, 0.5, ..., 4}
    const model md = make_model(c, 1);
    REQUIRE(md.exact_sums);
    for (std::size_t k = 0; k < c.length(); ++k) {
      CHECK(md.fw[k] == c.stages[k].forward_time);
      CHECK(bw_of(md, k) == c.stages[k].backward_time);
    }
    CHECK(bw_of(md, c.length()) == c.loss_time);
  }
  chain zeros;
  zeros.stages = {{0, 0, 1, 1, 0, 0}};
  const model z = make_model(zeros, 1);
  CHECK(z.exact_sums);
  CHECK(z.fw[0] == 0);
  static_assert(make_model(chain{{{1.5, 2.25, 1, 1, 0, 0}}, 1, 0.5, 0}, 1).fw[0] == 1.5);
}

TEST_CASE("times near the largest double are kept as given, without the exact-sums guarantee") {
  chain c;
  c.input_size = 1;
  c.stages = {{5e307, 5e307, 2, 3, 0, 0}};  // V = 1.5e308: 8 V is past every double
  const model md = make_model(c, 1);
  CHECK_FALSE(md.exact_sums);
  CHECK(md.time_quantum == 0);
  CHECK(md.fw[0] == 5e307);
  CHECK(bw_of(md, 0) == 5e307);
}

}  // namespace unit_detail_dp_model_test
