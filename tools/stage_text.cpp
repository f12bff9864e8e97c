#include "tools/stage_text.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tilejit/error.h"
#include "tilejit/stages.h"

namespace tilejit::tools {
namespace {

namespace fs = std::filesystem;

/// Whether `file` holds stage `stage`: NN-<stage>.tir for the tile IR, <stage>-<config>.* for llvm and ptx.
bool holds(const std::string &file, const std::string &stage) {
  if (file.size() > 3 && file[2] == '-' && file.ends_with(".tir"))
    return file.substr(3, file.size() - 7) == stage;
  return file.starts_with(stage + "-");
}

/// Restores the environment variable on every exit path, and removes the directory.
struct DumpDir {
  std::string path, previous;
  bool had_previous = false;
  DumpDir() {
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);  // TMPDIR, else /tmp
    if (ec || !fs::is_directory(tmp)) tmp = "/tmp";
    std::string pattern = (tmp / "tilejit-stages-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Error(fmt::format("cannot create a temporary directory at {}", pattern));
    path = pattern;
    if (const char *p = getenv("TILEJIT_DUMP_STAGES")) previous = p, had_previous = true;
    setenv("TILEJIT_DUMP_STAGES", path.c_str(), 1);
  }
  ~DumpDir() {
    if (had_previous) setenv("TILEJIT_DUMP_STAGES", previous.c_str(), 1);
    else unsetenv("TILEJIT_DUMP_STAGES");
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string stage_text(const std::string &stage, const std::function<void()> &render) {
  const std::vector<std::string> stages = compile_stages();
  if (std::find(stages.begin(), stages.end(), stage) == stages.end())
    throw Error(fmt::format("--stage {}: no such stage; the stages are {}", stage, fmt::join(stages, ", ")));
  DumpDir dir;
  render();
  std::vector<fs::path> kernels;
  for (const auto &e : fs::directory_iterator(dir.path))
    if (e.is_directory()) kernels.push_back(e.path());
  std::sort(kernels.begin(), kernels.end());
  std::string out;
  int found = 0;
  for (const fs::path &k : kernels) {
    std::vector<fs::path> files;
    for (const auto &e : fs::directory_iterator(k))
      if (holds(e.path().filename().string(), stage)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path &f : files) {
      std::ifstream in(f, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      // Headed in the file's own comment syntax: LLVM IR's `;`, PTX's and the tile IR's `//`.
      if (kernels.size() > 1)
        out += fmt::format("{} {}/{}\n", f.extension() == ".ll" ? ";" : "//", k.filename().string(),
                           f.filename().string());
      out += text.str();
      ++found;
    }
  }
  if (found == 0) throw Error(fmt::format("--stage {}: no kernel wrote this stage", stage));
  return out;
}

}  // namespace tilejit::tools
