// Reading a file's JSON document, as chain files (io/chain_json.hpp) and graph files
// (io/graph_json.hpp) both do: opening the path, reading at most a size, parsing, and handing each
// failure to the caller's error.
#pragma once

#include <remat/detail/io/json_values.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <istream>
#include <string>
#include <system_error>

namespace remat::io::detail {

// The most a chain or graph file may hold by default: far above any real one (JSON takes about
// 150 bytes per stage, and the DP solvers stop at a few thousand stages). Reading stops there, so
// that a path such as /dev/zero is an error, not a read until memory runs out.
inline constexpr std::size_t max_document_bytes = std::size_t{256} << 20;

// nlohmann's message without its id ("[json.exception.parse_error.101] "), and with bytes
// outside printable ASCII replaced: it quotes the input, which may not be text at all.
inline std::string json_error_text(const std::string& what) {
  std::string text = what;
  if (text.starts_with("[json.exception.")) {
    const auto end = text.find("] ");
    if (end != std::string::npos) text.erase(0, end + 2);
  }
  for (char& ch : text)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  return text;
}

// The JSON document in `in`, read up to `max_bytes` (chain and graph files alike).
// `fail(rule)` throws the caller's file error; `too_long` is its rule for a longer input.
template <class Fail>
json read_document(std::istream& in, std::size_t max_bytes, const std::string& too_long,
                   const Fail& fail) {
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) fail(too_long);
  }
  if (in.bad()) fail("cannot read the file");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail("not valid JSON: " + json_error_text(e.what()));
  } catch (const json::exception& e) {
    // Valid syntax nlohmann cannot represent, e.g. "number overflow parsing '1e400'".
    fail("cannot read: " + json_error_text(e.what()));
  }
  return {};  // not reached: fail throws
}

// `path` opened for reading; `fail(rule)` throws the caller's file error naming what is wrong.
template <class Fail>
std::ifstream open_document(const std::filesystem::path& path, const Fail& fail) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    fail("cannot open: " + (ec ? ec.message() : std::string("no such file")));
  if (std::filesystem::is_directory(status)) fail("cannot open: is a directory");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(errno != 0 ? "cannot open: " + std::generic_category().message(errno) : "cannot open");
  return in;
}

}  // namespace remat::io::detail
