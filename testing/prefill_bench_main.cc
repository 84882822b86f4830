// `prefill_bench`: the seed's serving measurements of the indexer skip on a
// whole attention stack (see prefill_bench.h and --help). The platforms and
// the CPU kernels register themselves through the static registrars the
// BUILD target links.
#include <iostream>
#include <string>
#include <vector>

#include "platform/registry.h"
#include "testing/prefill_bench.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return dsa::prefill_bench::Main(args, dsa::platform::Registry::Global(),
                                  std::cout, std::cerr);
}
