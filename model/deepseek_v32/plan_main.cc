// `plan`: prints each layer's indexer decision for a model, platform and
// batch (see plan_tool.h and --help). The platform plugins register
// themselves into the global registry through their static registrars, which
// the BUILD target links.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "model/deepseek_v32/plan_tool.h"
#include "platform/registry.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const int status = dsa::model::deepseek_v32::RunPlanTool(
      args, dsa::platform::Registry::Global(), std::cout, std::cerr);
  // RunPlanTool flushed std::cout and checked it; stdout itself is checked
  // once more, since the C library's buffer is what finally reaches the file.
  if (status == 0) {
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "plan: cannot write the output: %s\n",
                   errno != 0 ? std::strerror(errno) : "stream error");
      return 1;
    }
  }
  return status;
}
