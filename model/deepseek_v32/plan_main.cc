// `plan`: prints each layer's indexer decision for a model, platform and
// batch (see plan_tool.h and --help). The platform plugins register
// themselves into the global registry through their static registrars, which
// the BUILD target links.
#include <iostream>
#include <string>
#include <vector>

#include "model/deepseek_v32/plan_tool.h"
#include "platform/registry.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return dsa::model::deepseek_v32::RunPlanTool(
      args, dsa::platform::Registry::Global(), std::cout, std::cerr);
}
