// Running a built command-line tool from a test: its exit status, stdout and stderr.
#pragma once

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace remat::testing {

struct run_result {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// A directory of its own under the system's temporary directory, removed with the object.
class scratch_dir {
 public:
  explicit scratch_dir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("remat-" + tag + "-" + std::to_string(static_cast<long>(::getpid())))) {
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `exe` with `args` (no shell interpretation) and no standard input.
inline run_result run_tool(const std::string& exe, const std::vector<std::string>& args) {
  static const scratch_dir scratch("tool-output");
  const std::filesystem::path& dir = scratch.path();
  std::string command = shell_quote(exe);
  // Appended piece by piece: `" " + std::string` trips g++ 12's -Wrestrict false positive at
  // -O3 (see examples/tools/svg_chart.hpp).
  for (const std::string& a : args) {
    command += ' ';
    command += shell_quote(a);
  }
  command += " >";
  command += shell_quote((dir / "out").string());
  command += " 2>";
  command += shell_quote((dir / "err").string());
  command += " </dev/null";
  const int raw = std::system(command.c_str());
  run_result r;
  REQUIRE_MESSAGE(WIFEXITED(raw), exe << " did not exit normally: " << command);
  r.status = WEXITSTATUS(raw);
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

}  // namespace remat::testing
