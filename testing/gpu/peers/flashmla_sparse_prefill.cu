// Times FlashMLA's sm_90 sparse prefill kernel (the issue's peer) on the
// inputs `sparse_mla_bench --mode=prefill` builds, in the same way: every
// query row names `topk` distinct positions (a j + b) mod s_kv of one
// sequence, all valid; the median of single calls (the host waiting for
// each) and the time per call of calls queued back to back. Adds the W_UV
// product over the latent output (cuBLAS, a strided batch over heads), so
// that "FlashMLA + W_UV" is measured in the same process as our op. Checks
// two rows of the kernel's output against a float64 reference first.
//
// Built against a FlashMLA checkout by testing/gpu/peers/build_flashmla.sh
// (nvcc, sm_90a); not part of the Bazel build.
//
//   flashmla_sparse_prefill --heads=128 --tokens=8192 --topk=2048 --v=128
//       [--iters=20] [--then ...]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "params.h"
#include "peer_util.h"
#include "sm90/prefill/sparse/phase1.h"

namespace {

using peer::Bf16ToFloat;
using peer::Next;
using peer::RandomBf16;

constexpr int kDim = 576;
constexpr int kLora = 512;

struct Config {
  int heads = 128, tokens = 8192, topk = 2048, v = 128, iters = 20;
};

struct Run {
  SparseAttnFwdParams p;
  cublasHandle_t blas;
  const __nv_bfloat16* w_uv;  // [heads, 512, v]
  __nv_bfloat16* projected;   // [s_q, heads, v]
  int heads, v, rows;
  bool with_wuv;
};

void Call(const Run& r) {
  sm90::fwd::run_fwd_phase1_kernel<576, false>(r.p);
  if (!r.with_wuv) return;
  peer::WuvProduct(r.blas, r.w_uv, r.p.out, r.projected, r.rows, r.heads, r.v);
}

int RunOne(const Config& c) {
  const int heads = c.heads, rows = c.tokens, topk = c.topk, v = c.v;
  if (heads % 64 != 0 || topk % 128 != 0 || rows < 1 || v < 1 || c.iters < 1) {
    std::fprintf(stderr, "bad sizes (heads a multiple of 64, topk of 128)\n");
    return 2;
  }
  int64_t seq = 1;
  while (seq < std::max<int64_t>(rows, 2 * int64_t{topk})) seq *= 2;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  std::vector<uint16_t> q(int64_t{rows} * heads * kDim), kv(seq * kDim),
      w(int64_t{heads} * kLora * v);
  for (auto& x : q) x = RandomBf16(s);
  for (auto& x : kv) x = RandomBf16(s);
  for (auto& x : w) x = RandomBf16(s);
  std::vector<int32_t> idx(int64_t{rows} * topk);
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t a = 2 * (Next(s) % (seq / 2)) + 1, b = Next(s) % seq;
    for (int j = 0; j < topk; ++j) {
      idx[t * topk + j] = static_cast<int32_t>((a * j + b) % seq);
    }
  }
  void *d_q, *d_kv, *d_idx, *d_out, *d_max, *d_lse, *d_w, *d_proj;
  PEER_CHECK(cudaMalloc(&d_q, q.size() * 2));
  PEER_CHECK(cudaMalloc(&d_kv, kv.size() * 2));
  PEER_CHECK(cudaMalloc(&d_idx, idx.size() * 4));
  PEER_CHECK(cudaMalloc(&d_out, int64_t{rows} * heads * kLora * 2));
  PEER_CHECK(cudaMalloc(&d_max, int64_t{rows} * heads * 4));
  PEER_CHECK(cudaMalloc(&d_lse, int64_t{rows} * heads * 4));
  PEER_CHECK(cudaMalloc(&d_w, w.size() * 2));
  PEER_CHECK(cudaMalloc(&d_proj, int64_t{rows} * heads * v * 2));
  PEER_CHECK(cudaMemcpy(d_q, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  PEER_CHECK(
      cudaMemcpy(d_kv, kv.data(), kv.size() * 2, cudaMemcpyHostToDevice));
  PEER_CHECK(
      cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  PEER_CHECK(cudaMemcpy(d_w, w.data(), w.size() * 2, cudaMemcpyHostToDevice));

  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  Run r{};
  SparseAttnFwdParams& p = r.p;
  p.s_q = rows;
  p.s_kv = static_cast<int>(seq);
  p.h_q = heads;
  p.h_kv = 1;
  p.d_qk = kDim;
  p.d_v = kLora;
  p.topk = topk;
  p.sm_scale = scale;
  p.sm_scale_div_log2 = scale * 1.4426950408889634f;
  p.q = static_cast<cutlass::bfloat16_t*>(d_q);
  p.kv = static_cast<cutlass::bfloat16_t*>(d_kv);
  p.indices = static_cast<int*>(d_idx);
  p.attn_sink = nullptr;
  p.topk_length = nullptr;
  p.stride_q_s_q = heads * kDim;
  p.stride_q_h_q = kDim;
  p.stride_kv_s_kv = kDim;
  p.stride_kv_h_kv = kDim;
  p.stride_indices_s_q = topk;
  p.stride_indices_h_kv = topk;
  p.out = static_cast<cutlass::bfloat16_t*>(d_out);
  p.max_logits = static_cast<float*>(d_max);
  p.lse = static_cast<float*>(d_lse);
  int device = 0;
  PEER_CHECK(cudaGetDevice(&device));
  PEER_CHECK(cudaDeviceGetAttribute(&p.num_sm, cudaDevAttrMultiProcessorCount,
                                    device));
  PEER_CHECK(cudaStreamCreate(&p.stream));
  if (cublasCreate(&r.blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(r.blas, p.stream) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublas handle\n");
    return 1;
  }
  r.w_uv = static_cast<const __nv_bfloat16*>(d_w);
  r.projected = static_cast<__nv_bfloat16*>(d_proj);
  r.heads = heads;
  r.v = v;
  r.rows = rows;

  // The kernel's output of rows 0 and rows - 1 against float64.
  r.with_wuv = false;
  PEER_CHECK(cudaMemset(d_out, 0xff, int64_t{rows} * heads * kLora * 2));
  Call(r);
  PEER_CHECK(cudaStreamSynchronize(p.stream));
  double worst = 0;
  for (const int64_t t : {int64_t{0}, int64_t{rows} - 1}) {
    std::vector<uint16_t> got(int64_t{heads} * kLora);
    PEER_CHECK(cudaMemcpy(got.data(),
                          static_cast<uint8_t*>(d_out) + t * heads * kLora * 2,
                          got.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<std::vector<double>> keys(topk, std::vector<double>(kDim));
    for (int j = 0; j < topk; ++j) {
      const uint16_t* k = kv.data() + int64_t{idx[t * topk + j]} * kDim;
      for (int e = 0; e < kDim; ++e) keys[j][e] = Bf16ToFloat(k[e]);
    }
    for (int h = 0; h < heads; ++h) {
      worst = std::max(worst, peer::HeadWorstError(
                                  q.data() + (t * heads + h) * kDim, keys, kDim,
                                  kLora, scale, got.data() + h * kLora));
    }
  }
  if (!(worst <= 1.0 / 64)) {
    std::fprintf(stderr, "flashmla: worst error %g of the output scale\n",
                 worst);
    return 1;
  }
  r.with_wuv = false;
  const auto call = [&] { Call(r); };
  const float kernel_ms = peer::MedianMs(call, p.stream, c.iters);
  const float kernel_queued = peer::QueuedMs(call, p.stream, c.iters);
  r.with_wuv = true;
  const float ms = peer::MedianMs(call, p.stream, c.iters);
  const float queued = peer::QueuedMs(call, p.stream, c.iters);
  const double flops =
      static_cast<double>(rows) * heads * 2.0 * topk * (kDim + kLora);
  std::printf(
      "flashmla_sparse_prefill heads=%d rows=%d topk=%d v=%d "
      "kernel_ms=%.4f kernel_queued_ms=%.4f kernel_tflops=%.1f "
      "with_wuv_ms=%.4f with_wuv_queued_ms=%.4f check_worst=%.2g\n",
      heads, rows, topk, v, kernel_ms, kernel_queued,
      flops / (kernel_ms * 1e-3) / 1e12, ms, queued, worst);
  cublasDestroy(r.blas);
  PEER_CHECK(cudaStreamDestroy(p.stream));
  for (void* ptr : {d_q, d_kv, d_idx, d_out, d_max, d_lse, d_w, d_proj}) {
    PEER_CHECK(cudaFree(ptr));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Config c;
  return peer::RunEach(argc, argv,
                       {{"heads", &c.heads},
                        {"tokens", &c.tokens},
                        {"topk", &c.topk},
                        {"v", &c.v},
                        {"iters", &c.iters}},
                       [&] { return RunOne(c); });
}
