// Random valid schedules: random walks over docs/model.md's ops, persistent or not, so that memory
// plans and executors meet the odd sequences no solver returns (a_k and t_k held together,
// activations recomputed many times, checkpoints dropped late).
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace remat::testing {

// A walk that picks uniformly among the valid ops until g_0 exists; nullopt if it takes more than
// `max_ops` ops. The loss and each backward run once (the model would allow running them again,
// but executors refuse it: parameter gradients would be accumulated twice). Backward ops are
// favoured (weight `backward_weight`) so that walks end. With `transfers` (the chain needs both
// bandwidths) it also offloads, prefetches and waits for any tensor it may (docs/offload.md).
inline std::optional<std::vector<op>> random_schedule(const chain& c, std::mt19937_64& rng,
                                                      std::size_t max_ops = 200,
                                                      int backward_weight = 4,
                                                      bool transfers = false) {
  const auto L = static_cast<std::int32_t>(c.length());
  const auto n = static_cast<std::size_t>(L) + 1;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  std::vector<char> a(n, 0), t(n, 0), g(n, 0), done(n, 0);  // done[k]: B(k), or the loss for L
  std::vector<char> host_a(n, 0), host_t(n, 0);              // a host copy of a_k, t_k
  a[0] = 1;
  std::vector<op> ops;
  std::vector<op> choices;
  while (!g[0]) {
    if (ops.size() >= max_ops) return std::nullopt;
    choices.clear();
    for (std::int32_t k = 0; k < L; ++k) {
      if (!a[at(k)] && !t[at(k)]) continue;
      if (!a[at(k + 1)]) {
        choices.push_back(f_ck(k));
        if (k > 0) choices.push_back(f_none(k));  // dropping a_0 would end every walk
      }
      if (!t[at(k + 1)]) choices.push_back(f_all(k));
      if (g[at(k + 1)] && t[at(k + 1)] && !g[at(k)] && !done[at(k)])
        for (int w = 0; w < backward_weight; ++w) choices.push_back(backward(k));
    }
    for (std::int32_t k = 0; transfers && k <= L; ++k)
      for (const tensor_kind kind : {tensor_kind::activation, tensor_kind::tape}) {
        if (kind == tensor_kind::tape && k == 0) continue;
        const bool tape = kind == tensor_kind::tape;
        const bool held = tape ? t[at(k)] : a[at(k)];
        const bool host = tape ? host_t[at(k)] : host_a[at(k)];
        if (held && !host) choices.push_back(offload(k, kind));
        if (host && !held) choices.push_back(prefetch(k, kind));
        if (host) choices.push_back(wait_for(k, kind));
      }
    if ((a[at(L)] || t[at(L)]) && !g[at(L)] && !done[at(L)])
      for (int w = 0; w < backward_weight; ++w) choices.push_back(loss_op(L));
    const op o = choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(rng)];
    const std::int32_t k = o.stage;
    switch (o.kind) {
      case op_kind::forward_none:
        a[at(k + 1)] = 1;
        a[at(k)] = 0;
        break;
      case op_kind::forward_checkpoint: a[at(k + 1)] = 1; break;
      case op_kind::forward_all: t[at(k + 1)] = 1; break;
      case op_kind::loss:
        g[at(L)] = done[at(L)] = 1;
        a[at(L)] = 0;
        break;
      case op_kind::backward:
        g[at(k)] = done[at(k)] = 1;
        g[at(k + 1)] = t[at(k + 1)] = a[at(k)] = 0;
        break;
      case op_kind::offload:
        (o.tensor == tensor_kind::tape ? t : a)[at(k)] = 0;
        (o.tensor == tensor_kind::tape ? host_t : host_a)[at(k)] = 1;
        break;
      case op_kind::prefetch:
        (o.tensor == tensor_kind::tape ? t : a)[at(k)] = 1;
        (o.tensor == tensor_kind::tape ? host_t : host_a)[at(k)] = 0;
        break;
      case op_kind::wait: break;
    }
    ops.push_back(o);
  }
  return ops;
}

}  // namespace remat::testing
