// Fuzz target: the chain file reader (remat/io/chain_json.hpp). Any bytes either read as a chain
// that passes `remat::validate`, or throw `chain_file_error` naming the source; a chain that
// reads is written and read back unchanged.
#include <remat/io/chain_json.hpp>

#include "fuzz_input.hpp"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  remat::io::chain_file file;
  try {
    file = remat::io::read_chain(in, "fuzz.json");
  } catch (const remat::io::chain_file_error& e) {
    if (!std::string_view(e.what()).starts_with("fuzz.json: "))
      remat::fuzz::fail("an error message does not start with the source name");
    return 0;
  }
  remat::validate(file.chain);  // a chain that reads is valid: throwing here stops the fuzzer
  std::ostringstream out;
  remat::io::write_chain(out, file);
  std::istringstream back(out.str());
  if (!(remat::io::read_chain(back, "written.json") == file))
    remat::fuzz::fail("a chain written and read back differs");
  return 0;
}
