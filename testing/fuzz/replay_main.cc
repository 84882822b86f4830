// The main() of a fuzz target outside --config=fuzz: replays inputs (files,
// or every regular file of a directory) through LLVMFuzzerTestOneInput once
// each, so the seed corpus and the kept regression inputs run as ordinary
// tests in the regular (gcc) suite and under --config=asan. Under
// --config=fuzz libFuzzer's own main() replaces this one, and given files it
// does the same.
//
// Fails when no input was found: an empty corpus would otherwise pass
// without testing anything.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv)
    __attribute__((weak));

namespace {

bool ReadFile(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in),
              std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() > 1 && arg[0] == '-') continue;  // a libFuzzer flag
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::string> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg, ec)) {
        if (entry.is_regular_file(ec)) files.push_back(entry.path().string());
      }
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else {
      inputs.push_back(arg);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "%s: no inputs (give corpus files or directories)\n",
                 argv[0]);
    return 1;
  }
  std::vector<uint8_t> data;
  for (const std::string& path : inputs) {
    if (!ReadFile(path, &data)) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], path.c_str());
      return 1;
    }
    std::fprintf(stderr, "Running: %s (%zu bytes)\n", path.c_str(),
                 data.size());
    // A copy of exactly the input's size, so reads past the end are caught
    // under ASan as they are under libFuzzer.
    std::unique_ptr<uint8_t[]> exact(new uint8_t[data.size()]);
    std::copy(data.begin(), data.end(), exact.get());
    LLVMFuzzerTestOneInput(exact.get(), data.size());
  }
  std::fprintf(stderr, "%s: replayed %zu inputs\n", argv[0], inputs.size());
  return 0;
}
