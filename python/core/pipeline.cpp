// Pipelines for Python (remat/pipeline.hpp): K per rank, a rank's chain, the split that makes the
// slowest rank fastest, a given split solved, and the every-stage-checkpointed baseline.
#include "bindings.hpp"
#include "solve_args.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/pipeline.hpp>

#include <pybind11/stl.h>

#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace remat::python {

namespace {

// A rank's part with its result as `solve` returns it (replayed on the rank's own chain).
struct py_stage_part {
  std::size_t first = 0, end = 0, in_flight = 1;
  py_result result;
  size_type memory = 0;
};

struct py_pipeline {
  remat::pipeline_result p;
  std::vector<py_stage_part> stages;
};

std::vector<std::size_t> counts_from(const std::vector<long long>& values, const char* what) {
  std::vector<std::size_t> out;
  for (const long long v : values) {
    if (v < 0)
      throw py::value_error(std::string(what) + " must be >= 0 (got " + std::to_string(v) + ")");
    out.push_back(static_cast<std::size_t>(v));
  }
  return out;
}

remat::solve_options options_from(const std::string& solver, py::handle slots, py::handle coarsen,
                                  unsigned threads) {
  remat::solve_options o;
  o.solver = solver_named(solver);
  o.slots = slots_from(slots);
  o.coarsen = coarsen_from(coarsen);
  o.threads = threads;
  return o;
}

// Each rank's result replayed on its own chain, as `solve` reports one.
py_pipeline wrap(const remat::chain& c, remat::pipeline_result p, remat::solver s) {
  py_pipeline out;
  for (const remat::pipeline_stage& st : p.stages) {
    py_stage_part part{st.first, st.end, st.in_flight, {}, st.memory()};
    part.result.solver = std::string(remat::name(s));
    part.result.in_flight = st.in_flight;
    part.result.r = st.result;
    part.result.replayed =
        remat::simulate(remat::stage_chain(c, st.first, st.end), st.result.schedule);
    out.stages.push_back(std::move(part));
  }
  out.p = std::move(p);
  return out;
}

remat::pipeline_schedule schedule_named(const std::string& name) {
  if (const auto s = remat::parse_pipeline_schedule(name)) return *s;
  throw py::value_error("schedule '" + name +
                        "': one of '1f1b', 'gpipe' (for a torch.distributed.pipelining schedule "
                        "object use remat.torch.micro_batches_in_flight)");
}

std::string pipeline_repr(const py_pipeline& w) {
  std::ostringstream o;
  o.precision(17);
  o << "PipelineResult(feasible=" << (w.p.feasible ? "True" : "False")
    << ", budget=" << w.p.budget;
  if (w.p.feasible) {
    o << ", slowest=" << w.p.slowest << ", starts=[";
    for (std::size_t r = 0; r < w.stages.size(); ++r)
      o << (r == 0 ? "" : ", ") << w.stages[r].first;
    o << "]";
  } else if (w.p.min_feasible_budget != remat::solve_result::no_budget) {
    o << ", min_feasible_budget=" << w.p.min_feasible_budget;
  }
  o << ")";
  return o.str();
}

void bind_results(py::module_& m) {
  py::class_<py_stage_part>(m, "PipelineStage",
                            "One rank's part of a pipeline: stages [first, end) of the chain, "
                            "in_flight micro-batches in flight, and its schedule on "
                            "stage_chain(chain, first, end).")
      .def_property_readonly("first", [](const py_stage_part& s) { return s.first; })
      .def_property_readonly("end", [](const py_stage_part& s) { return s.end; })
      .def_property_readonly("in_flight", [](const py_stage_part& s) { return s.in_flight; })
      .def_property_readonly("result", [](const py_stage_part& s) { return s.result; },
                             "The rank's SolveResult (ops on its own chain, stages from 0).")
      .def_property_readonly(
          "time", [](const py_stage_part& s) { return s.result.r.schedule.makespan; },
          "One micro-batch's forward and backward on this rank.")
      .def_property_readonly("memory", [](const py_stage_part& s) { return s.memory; },
                             "peak_memory + (in_flight - 1) * retained.")
      .def("__repr__", [](const py_stage_part& s) {
        std::ostringstream o;
        o.precision(17);
        o << "PipelineStage(first=" << s.first << ", end=" << s.end
          << ", in_flight=" << s.in_flight << ", feasible="
          << (s.result.r.feasible ? "True" : "False") << ", time=" << s.result.r.schedule.makespan
          << ", memory=" << s.memory << ")";
        return o.str();
      });
  py::class_<py_pipeline>(m, "PipelineResult", "Every rank's stages and schedule.")
      .def_property_readonly("feasible", [](const py_pipeline& w) { return w.p.feasible; })
      .def_property_readonly("budget", [](const py_pipeline& w) { return w.p.budget; })
      .def_property_readonly(
          "slowest",
          [](const py_pipeline& w) -> std::optional<double> {
            if (!w.p.feasible) return std::nullopt;
            return w.p.slowest;
          },
          "The slowest rank's time per micro-batch; None when the pipeline does not fit.")
      .def_property_readonly(
          "min_feasible_budget",
          [](const py_pipeline& w) -> std::optional<size_type> {
            if (w.p.min_feasible_budget == remat::solve_result::no_budget) return std::nullopt;
            return w.p.min_feasible_budget;
          },
          "split_pipeline: where no split fits, the least budget per rank at which one does; "
          "where one fits, the least at which its split does. None when no budget does.")
      .def_property_readonly("solves", [](const py_pipeline& w) { return w.p.solves; })
      .def_property_readonly("starts", [](const py_pipeline& w) { return w.p.starts(); })
      .def_property_readonly("stages", [](const py_pipeline& w) { return w.stages; })
      .def("__bool__", [](const py_pipeline& w) { return w.p.feasible; })
      .def("__repr__", &pipeline_repr);
}

}  // namespace

void bind_pipeline(py::module_& m) {
  bind_results(m);
  m.def(
      "micro_batches_in_flight",
      [](const std::string& schedule, std::size_t ranks, std::size_t micro_batches) {
        return remat::micro_batches_in_flight(schedule_named(schedule), ranks, micro_batches);
      },
      py::arg("schedule"), py::arg("ranks"), py::arg("micro_batches"),
      "K per rank, rank 0 first: 'gpipe' M on every rank, '1f1b' min(M, P - r).");
  m.def(
      "stage_chain",
      [](const remat::io::chain_file& f, std::size_t first, std::size_t end) {
        remat::io::chain_file out = f;
        out.chain = remat::stage_chain(f.chain, first, end);
        if (!f.stage_names.empty())
          out.stage_names.assign(f.stage_names.begin() + static_cast<std::ptrdiff_t>(first),
                                 f.stage_names.begin() + static_cast<std::ptrdiff_t>(end));
        return out;
      },
      py::arg("chain"), py::arg("first"), py::arg("end"),
      "The chain a rank runs for stages [first, end): its input is stage first - 1's output, its "
      "loss the chain's only where end is the chain's length (elsewhere: no time, no memory).");
  m.def("equal_starts", &remat::equal_starts, py::arg("length"), py::arg("ranks"),
        "Equal stages per rank (the first length % ranks ranks one more): each rank's first "
        "stage.");
  m.def(
      "split_pipeline",
      [](const remat::io::chain_file& f, py::handle budget, std::vector<long long> in_flight,
         const std::string& solver, py::handle slots, py::handle coarsen, unsigned threads) {
        const remat::solve_options o = options_from(solver, slots, coarsen, threads);
        const size_type b = budget_from(budget);
        const std::vector<std::size_t> K = counts_from(in_flight, "in_flight");
        remat::pipeline_result p;
        {
          const py::gil_scoped_release no_gil;
          p = remat::split_pipeline(f.chain, b, K, o);
        }
        return wrap(f.chain, std::move(p), o.solver);
      },
      py::arg("chain"), py::arg("budget"), py::arg("in_flight"), py::arg("solver") = "optimal",
      py::arg("slots") = py::none(), py::arg("coarsen") = py::none(), py::arg("threads") = 1,
      "The contiguous split of the chain into len(in_flight) ranks, and each rank's schedule with "
      "in_flight[r] micro-batches in flight within `budget` per rank, that makes the slowest "
      "rank fastest (exact over every split, for the schedules `solver` returns).");
  m.def(
      "solve_pipeline",
      [](const remat::io::chain_file& f, py::handle budget, std::vector<long long> in_flight,
         std::vector<long long> starts, const std::string& solver, py::handle slots,
         py::handle coarsen, unsigned threads) {
        const remat::solve_options o = options_from(solver, slots, coarsen, threads);
        const size_type b = budget_from(budget);
        const std::vector<std::size_t> K = counts_from(in_flight, "in_flight");
        const std::vector<std::size_t> s = counts_from(starts, "starts");
        remat::pipeline_result p;
        {
          const py::gil_scoped_release no_gil;
          p = remat::solve_pipeline(f.chain, b, K, s, o);
        }
        return wrap(f.chain, std::move(p), o.solver);
      },
      py::arg("chain"), py::arg("budget"), py::arg("in_flight"), py::arg("starts"),
      py::arg("solver") = "optimal", py::arg("slots") = py::none(), py::arg("coarsen") = py::none(),
      py::arg("threads") = 1,
      "Each rank's schedule for the split `starts` (each rank's first stage, from 0).");
  m.def(
      "checkpoint_every_stage",
      [](const remat::io::chain_file& f, py::handle budget, std::vector<long long> in_flight,
         std::vector<long long> starts) {
        const size_type b = budget_from(budget);
        return wrap(f.chain,
                    remat::checkpoint_every_stage(f.chain, b, counts_from(in_flight, "in_flight"),
                                                  counts_from(starts, "starts")),
                    remat::solver::sequential);
      },
      py::arg("chain"), py::arg("budget"), py::arg("in_flight"), py::arg("starts"),
      "The split `starts` with every stage but each rank's last checkpointed (full "
      "recomputation), each rank judged with its K; kept even where over the budget.");
}

}  // namespace remat::python
