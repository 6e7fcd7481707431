// Tests of remat/io/graph_json.hpp: random graphs and the zoo's graphs write and read back
// equal; malformed files are errors naming the file and the place.
#include <remat/io/graph_json.hpp>

#include <remat/zoo/graphs.hpp>

#include <doctest/doctest.h>

#include <random_graph.hpp>
#include <trials.hpp>

#include <filesystem>
#include <random>
#include <sstream>
#include <string>

namespace unit_io_graph_json_test {

namespace {

remat::io::graph_file round_trip(const remat::io::graph_file& f) {
  std::stringstream s;
  remat::io::write_graph(s, f);
  return remat::io::read_graph(s, "g.json");
}

void read_fails(const std::string& text, const std::string& message) {
  std::istringstream in(text);
  CHECK_THROWS_WITH_AS(remat::io::read_graph(in, "g.json"), message.c_str(),
                       remat::io::graph_file_error);
}

}  // namespace

TEST_CASE("graph_json: random graphs read back equal, by index or by name") {
  std::mt19937_64 rng(4305);
  for (int trial = 0; trial < remat::testing::trials(300); ++trial) {
    remat::io::graph_file f{remat::testing::random_graph(rng), "random", "ms", "bytes"};
    CHECK(round_trip(f) == f);
    // Duplicate names: the writer names values by index.
    f.graph.values[0].name = f.graph.values.back().name;
    CHECK(round_trip(f) == f);
  }
  const auto n = remat::zoo::build_graph("gpt2-small", {});
  const remat::io::graph_file z{n.graph, n.name, "ms", "bytes"};
  CHECK(round_trip(z) == z);
}

TEST_CASE("graph_json: malformed files name the place") {
  const std::string values =
      R"("values": [{"name": "x", "size": 4, "kind": "input"}, {"name": "h", "size": 4}])";
  read_fails(R"({"format": "remat-chain/1"})",
             R"(g.json: format: must be "remat-graph/1" (got "remat-chain/1"))");
  read_fails(R"({"format": "remat-graph/1", "nodes": []})", "g.json: values: missing (required)");
  read_fails("{" + values + R"(, "nodes": [{"inputs": ["x", "y"], "outputs": ["h"]}]})",
             R"(g.json: nodes[0].inputs[1]: no value named "y")");
  read_fails("{" + values + R"(, "nodes": [{"inputs": ["x"], "outputs": ["h"], "forward_time": "1"}]})",
             "g.json: nodes[0].forward_time: must be a number (got string)");
  read_fails(R"({"values": [{"size": 1.5}], "nodes": []})",
             "g.json: values[0].size: must be an integer (got 1.5)");
  // The chain reader's checks of a size, word for word.
  read_fails(R"({"values": [{"size": 4.0}], "nodes": []})",
             "g.json: values[0].size: must be an integer (got 4.0; write sizes without a "
             "fraction or exponent)");
  read_fails(R"({"values": [{"size": 18446744073709551616}], "nodes": []})",
             "g.json: values[0].size: must be <= 2^62 (1.8446744073709552e+19)");
  read_fails(R"({"values": [{"size": 4611686018427387905}], "nodes": []})",
             "g.json: values[0].size: must be <= 2^62 (4611686018427387905)");
  read_fails(R"({"values": [{"size": 4, "name": 7}], "nodes": []})",
             "g.json: values[0].name: must be a string (got number)");
  read_fails(R"({"values": [{"size": 1, "kind": "param"}], "nodes": []})",
             R"(g.json: values[0].kind: must be "input", "global" or "activation" (got "param"))");
  read_fails("{" + values + R"(, "nodes": [{"name": "a", "inputs": ["h"], "outputs": ["h"]}]})",
             R"(g.json: node 0 ("a"): reads value 1 ("h"), which it makes itself (the nodes must )"
             "be in an order where makers come first; a cycle has none)");
  read_fails("not json", "g.json: not valid JSON: parse error at line 1, column 2: syntax error "
                         "while parsing value - invalid literal; last read: 'no'");
  read_fails(R"({"values": [{"size": 1e400}], "nodes": []})",
             "g.json: cannot read: number overflow parsing '1e400'");
  std::istringstream big(std::string(64, ' '));
  CHECK_THROWS_WITH_AS(remat::io::read_graph(big, "g.json", 32),
                       "g.json: not a graph file: longer than 32 bytes",
                       remat::io::graph_file_error);
}

TEST_CASE("graph_json: files that cannot be opened say why, as chain files do") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  CHECK_THROWS_WITH_AS(remat::io::read_graph_file(dir),
                       (dir.string() + ": cannot open: is a directory").c_str(),
                       remat::io::graph_file_error);
  const std::filesystem::path missing = dir / "remat-no-such-graph.json";
  CHECK_THROWS_WITH_AS(remat::io::read_graph_file(missing),
                       (missing.string() + ": cannot open: No such file or directory").c_str(),
                       remat::io::graph_file_error);
}

}  // namespace unit_io_graph_json_test
