// remat-zoo: writes a network of the zoo (include/remat/zoo.hpp, docs/cli.md) as a chain file
// (docs chain-format.md), each stage with its forward `flops` and the chain with its
// `total_flops` and the settings it was built with (keys that chain readers ignore), and with a
// `transfer` object where --pcie or --transfer gives the link to host memory.
#include "bandwidth_arg.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/zoo.hpp>
#include <remat/zoo/graphs.hpp>

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

// Bad arguments: exit status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string usage() {
  std::string text =
      "usage: remat-zoo MODEL [--batch N] [--image S | --seq S] [--dtype fp32|fp16|bf16]\n"
      "                 [--peak-flops F] [--bandwidth B] [--layers N] [--ops]\n"
      "                 [--pcie 4|5 | --transfer BW] [--graph] [-o FILE]\n"
      "MODEL:";
  for (const std::string_view m : remat::zoo::model_names) text += " " + std::string(m);
  return text +
         "\nWrites the model's chain (times in ms, sizes in bytes) as JSON to FILE or stdout.\n"
         "  --batch N        samples per batch (CNNs: 32, GPT-2: 8)\n"
         "  --image S        CNNs: S x S images (224; resnet1001: 32)\n"
         "  --seq S          GPT-2: tokens per sequence (1024)\n"
         "  --dtype T        bytes per activation element (CNNs: fp32, GPT-2: bf16)\n"
         "  --peak-flops F   FLOP/s of the roofline (A100: 19.5e12 fp32, 312e12 fp16/bf16)\n"
         "  --bandwidth B    memory bytes/s of the roofline (A100: 2.0e12)\n"
         "  --layers N       GPT-2: transformer blocks (the model's: 12, 24, 36, 48)\n"
         "  --ops            one stage per operator (a GPT-2 block is 19) instead of one per\n"
         "                   layer or block: the long chains a profiler sees\n"
         "  --pcie 4|5       a link to host memory for offloading: PCIe 4.0 x16 (25 GB/s each\n"
         "                   way) or 5.0 x16 (47 GB/s device to host, 55 GB/s host to device)\n"
         "  --transfer BW    a link of BW, e.g. 25GB/s, or OUT,IN as 47GB/s,55GB/s (B/s, KB/s,\n"
         "                   MB/s, GB/s, TB/s: 1000s; KiB/s, MiB/s, GiB/s, TiB/s: 1024s; a bare\n"
         "                   number is bytes per ms, the file's units)\n"
         "  --graph          write the op-level graph (docs/graph-format.md) instead of a chain:\n"
         "                   resnet50/101/152, densenet121, gpt2-*, and unet (a U-Net)\n";
}

remat::size_type parse_count(std::string_view option, std::string_view text) {
  remat::size_type value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw usage_error(std::string(option) + ": expected an integer, got \"" + std::string(text) +
                      "\"");
  return value;
}

// A positive rate such as 312e12. strtod, not from_chars: some standard libraries still lack
// the floating-point overloads.
double parse_rate(std::string_view option, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double value = s.empty() ? 0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(value))
    throw usage_error(std::string(option) + ": expected a number, got \"" + s + "\"");
  return value;
}

// The chain file's units: the zoo's times are in ms, its sizes in bytes.
constexpr std::string_view time_unit = "ms";
constexpr std::string_view memory_unit = "bytes";

// Achieved host-device bandwidths of a PCIe x16 link with pinned memory (docs/cli.md):
// device-to-host, then host-to-device.
remat::tools::bandwidth_arg pcie(std::string_view generation) {
  if (generation == "4") return remat::tools::parse_bandwidth("--pcie", "25GB/s");
  if (generation == "5") return remat::tools::parse_bandwidth("--pcie", "47GB/s,55GB/s");
  throw usage_error("--pcie: expected 4 or 5, got \"" + std::string(generation) + "\"");
}

struct request {
  std::string model;
  remat::zoo::options options;
  std::optional<std::string> output;
  std::optional<remat::tools::bandwidth_arg> transfer;  ///< --pcie or --transfer
  std::optional<int> pcie;                              ///< --pcie, recorded under `zoo`
  bool help = false;
  bool graph = false;  ///< --graph
};

request parse(const std::vector<std::string_view>& args) {
  request r;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      r.help = true;
      return r;
    }
    if (!a.starts_with("-")) {
      if (!r.model.empty())
        throw usage_error("more than one model: \"" + r.model + "\" and \"" + std::string(a) +
                          "\"");
      r.model = a;
      continue;
    }
    if (a == "--graph") {
      r.graph = true;
      continue;
    }
    if (a == "--ops") {
      r.options.operators = true;
      continue;
    }
    if (i + 1 == args.size()) throw usage_error(std::string(a) + ": needs a value");
    const std::string_view v = args[++i];
    if (a == "--batch") {
      r.options.batch = parse_count(a, v);
    } else if (a == "--image") {
      r.options.image_size = parse_count(a, v);
    } else if (a == "--seq") {
      r.options.sequence_length = parse_count(a, v);
    } else if (a == "--dtype") {
      r.options.dtype = remat::zoo::dtype_from_name(v);
      if (!r.options.dtype)
        throw usage_error("--dtype: expected fp32, fp16 or bf16, got \"" + std::string(v) + "\"");
    } else if (a == "--layers") {
      const remat::size_type layers = parse_count(a, v);
      if (layers < 1 || layers > 100000)
        throw usage_error("--layers: expected 1 to 100000, got " + std::string(v));
      r.options.layers = static_cast<int>(layers);
    } else if (a == "--peak-flops") {
      r.options.peak_flops = parse_rate(a, v);
    } else if (a == "--bandwidth") {
      r.options.bandwidth = parse_rate(a, v);
    } else if (a == "--pcie" || a == "--transfer") {
      if (r.transfer)
        throw usage_error(r.transfer->option == a ? std::string(a) + ": given twice"
                                                  : "--pcie and --transfer exclude each other");
      r.transfer = a == "--pcie" ? pcie(v) : remat::tools::parse_bandwidth(a, v);
      if (a == "--pcie") r.pcie = v == "4" ? 4 : 5;
    } else if (a == "-o") {
      r.output = std::string(v);
    } else {
      throw usage_error("unknown option " + std::string(a));
    }
  }
  if (r.model.empty()) throw usage_error("no model given");
  if (r.graph && (r.transfer || r.options.operators))
    throw usage_error("--graph: graphs take neither --ops nor a link (--pcie, --transfer)");
  return r;
}

// The chain file of chain-format.md, plus the zoo's extra keys.
nlohmann::ordered_json document(const remat::zoo::network& n, const request& r) {
  remat::io::chain_file f;
  f.chain = n.chain;
  f.name = n.name;
  f.stage_names = n.stage_names;
  f.time_unit = time_unit;
  f.memory_unit = memory_unit;
  if (r.transfer) remat::tools::set_transfer(f.chain, *r.transfer, time_unit, memory_unit);
  nlohmann::ordered_json doc = remat::io::to_json(f);
  for (std::size_t k = 0; k < n.stage_flops.size(); ++k)
    doc["stages"][k]["flops"] = n.stage_flops[k];
  doc["total_flops"] = n.total_flops;
  doc["description"] = n.description;
  const remat::zoo::settings& s = n.used;
  nlohmann::ordered_json zoo;
  zoo["model"] = s.model;
  zoo["batch"] = s.batch;
  if (s.image_size != 0) zoo["image_size"] = s.image_size;
  if (s.sequence_length != 0) zoo["sequence_length"] = s.sequence_length;
  zoo["dtype"] = std::string(remat::zoo::name(s.dtype));
  zoo["peak_flops"] = s.peak_flops;
  zoo["bandwidth"] = s.bandwidth;
  // GPT-2's depth, where it is not the model's own (files of the model's depth stay as they were).
  const auto own = remat::zoo::detail::gpt2_config_of(s.model);
  if (own && own->layers != s.layers) zoo["layers"] = s.layers;
  if (s.operators) zoo["operators"] = true;
  if (r.pcie) zoo["pcie"] = *r.pcie;
  doc["zoo"] = std::move(zoo);
  return doc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string_view> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    const request r = parse(args);
    if (r.help) {
      std::cout << usage();
      return 0;
    }
    std::string text;
    if (r.graph) {
      remat::zoo::graph_network n = remat::zoo::build_graph(r.model, r.options);
      remat::io::graph_file f{std::move(n.graph), n.name, std::string(time_unit),
                              std::string(memory_unit)};
      text = remat::io::to_json(f).dump(2) + "\n";
    } else {
      text = document(remat::zoo::build(r.model, r.options), r).dump(2) + "\n";
    }
    if (r.output) {
      std::ofstream out(*r.output, std::ios::binary | std::ios::trunc);
      out << text;
      out.close();
      if (!out) {
        std::cerr << "remat-zoo: cannot write " << *r.output << "\n";
        return 2;
      }
    } else {
      std::cout << text;
      std::cout.flush();
      if (!std::cout) {
        std::cerr << "remat-zoo: cannot write the output\n";
        return 2;
      }
    }
    return 0;
  } catch (const std::exception& e) {  // bad arguments, or a zoo_error: unknown model, bad option
    std::cerr << "remat-zoo: " << e.what() << "\nTry 'remat-zoo --help' for more information.\n";
    return 2;
  }
}
