// The report tests' fixed result (sample_result.h).
#include "bench/prefill/report/sample_result.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dsa::prefill_bench {
namespace {

ArmResult MakeArm(const char* name, double base, bool gpu) {
  ArmResult a;
  a.spec = FindArm(name);
  a.ran = true;
  a.ttft_ms = {base, base * 1.03};
  a.median_ttft_ms = base * 1.015;
  a.ttft_cpu_ms = {base * 1.6, base * 1.62};
  a.median_ttft_cpu_ms = base * 1.61;
  a.indexer_scored = 16;
  a.indexer_total = 112;
  a.launches_per_step = 24;
  a.all_launches_per_step = 71.5;
  a.steps = 16;
  if (gpu) {
    a.host_issue_ms = 36.7251;
    a.device_tail_ms = 0.031459;
    a.prepare_ms = 3.79905;
    a.read_back_ms = 131.8459;
  }
  return a;
}

}  // namespace

BenchResult SampleResult(bool gpu) {
  BenchResult r;
  r.platform = {gpu ? "cuda" : "emulated-rocm",
                gpu ? "sm_90" : "gfx950",
                !gpu,
                gpu ? "cuda" : "cpu",
                true,
                gpu ? "" : "auto: no GPU device"};
  r.model = "tiny-glm-5.1";
  r.model_source = "preset tiny-glm-5.1 (random weights)";
  r.main_layers = 6;
  r.mtp_layers = 1;
  r.indexer_layers = 7;
  r.index_topk = 64;
  r.spec_tokens = gpu ? 1 : 0;
  r.commit = "abc123";
  r.runs = gpu ? 1 : 2;
  r.max_num_batched_tokens = 256;
  r.block_size = 64;
  r.num_blocks = 40;
  r.kv_cache_dtype = "bfloat16";
  r.weights = "bfloat16";
  r.op_clock = "device";
  r.gpu_timing_note =
      gpu ? "per step, the median" : "n/a: the step executes on the CPU";

  WorkloadResult w;
  w.workload = {"1k_c1", 1024, 32, 16, 1};
  w.steps = 16;
  ArmResult m = MakeArm("main", 34.57, gpu);
  m.indexer_scored = 112;
  m.launches_per_step = 42;
  m.op_times.emplace();
  m.op_times->ms.indexer_k_write = 1.85926;
  m.op_times->ms.indexer_logits = 3.79944;
  m.op_times->ms.gemm = 150.0316;
  m.op_times->ms.cast = 0.004697;
  m.op_times->ms.indexer_scoring = 13.2997;
  m.op_times->calls.indexer_k_write = 2;
  m.op_times->calls.indexer_logits = 2;
  m.op_times->calls.gemm = 14;
  m.op_times->calls.cast = 1;
  m.op_times->host_issue_ms = 36.7251;
  ArmResult s = MakeArm("skip", 29.19, gpu);
  s.outputs_equal = true;
  s.caches_equal = true;
  s.op_times.emplace();
  s.op_times->ms.gemm = 140.5;
  s.op_times->calls.gemm = 14;
  s.op_times->host_issue_ms = 30.25;
  ArmResult b = MakeArm("no_indexer", 24.39, gpu);
  b.indexer_scored = 0;
  b.outputs_equal = true;
  b.launches_per_step = 14;
  w.arms = {m, s, b};
  w.change = CompareRuns(s.ttft_ms, m.ttft_ms);
  w.change_cpu = CompareRuns(s.ttft_cpu_ms, m.ttft_cpu_ms);
  w.bound_change_pct = -29.4;
  w.bound_change_cpu_pct = -26.6;
  w.outputs_equal = true;
  r.workloads.push_back(w);

  WorkloadResult w2;
  w2.workload = {"8k_c1", 8192, 256, 3, 1};
  w2.steps = 6;
  ArmResult m2 = MakeArm("main", 287.2, gpu);
  m2.deterministic = false;
  m2.indexer_scored = 21;
  m2.indexer_total = 21;
  ArmResult s2 = MakeArm("skip", 278.4, gpu);
  s2.outputs_equal = false;
  s2.caches_equal = false;
  ArmResult b2;
  b2.spec = FindArm("no_indexer");
  b2.not_run_reason =
      "prompts of 256 tokens > index_topk 64 take the sparse path, which "
      "reads the indexer's top-k";
  w2.arms = {m2, s2, b2};
  w2.change = CompareRuns(s2.ttft_ms, m2.ttft_ms);
  w2.change_cpu = CompareRuns({1, 2}, {1.0, 2.0});
  w2.outputs_equal = false;
  r.workloads.push_back(w2);

  WorkloadResult w3;
  w3.workload = {"1k_c32", 1024, 32, 32, 32};
  w3.steps = 4;
  ArmResult s3 = MakeArm("skip", 7.5, gpu);
  s3.ttft_ms = {7.5};
  s3.ttft_cpu_ms = {9.25};
  ArmResult m3 = MakeArm("main", 9.5, gpu);
  m3.ttft_ms = {9.5};
  m3.ttft_cpu_ms = {0.0};
  w3.arms = {s3, m3};
  w3.change = CompareRuns(s3.ttft_ms, m3.ttft_ms);
  w3.change_cpu = CompareRuns(s3.ttft_cpu_ms, m3.ttft_cpu_ms);
  r.workloads.push_back(w3);
  return r;
}

std::string ReadTestdata(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  std::ifstream in(std::string(srcdir != nullptr ? srcdir : ".") +
                   "/dsa/bench/prefill/report/testdata/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace dsa::prefill_bench
