// Times FlashMLA's sm_90 sparse decode over an fp8 (fp8_ds_mla, 656 bytes a
// token) cache, the issue's peer for decode, on the inputs
// `sparse_mla_bench --mode=decode --cache=fp8` builds: `requests` requests
// of `context` tokens in pages of 64 on a random block table, `mtp` query
// tokens a request, each naming `topk` distinct positions of its request.
// The scheduler's metadata is computed once (as an engine does once a step
// for all layers); what is timed is the decode kernel and its combine, then
// the same with the W_UV product by cuBLAS after them (our op's work:
// `v` values a head): the median of single calls and the time per call
// queued back to back. Checks the first and last rows against a float64
// reference first.
//
// Built against a FlashMLA checkout by testing/gpu/peers/build_flashmla.sh.
//
//   flashmla_sparse_decode --heads=128 --requests=32 --context=8192 \
//       --mtp=1 [--topk=2048] [--v=128] [--iters=50] [--then ...]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "params.h"
#include "peer_util.h"
#include "sm90/decode/sparse_fp8/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

namespace {

using peer::Bf16ToFloat;
using peer::Next;
using peer::RandomBf16;

constexpr int kDim = 576, kLora = 512, kRope = 64, kEntry = 656;
constexpr int kPage = 64;

// e4m3fn code to float (no NaN codes are drawn).
double E4m3(uint8_t c) {
  const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const double mag =
      e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -mag : mag;
}

struct Config {
  int heads = 128, requests = 32, context = 8192, mtp = 1, topk = 2048, v = 128,
      iters = 50;
};

struct Run {
  SparseAttnDecodeParams p;
  CombineParams combine;
  cublasHandle_t blas;
  const void* w_uv;  // [heads, 512, v] bf16
  void* projected;   // [rows, heads, v] bf16
  int rows, heads, v;
  bool with_wuv;
};

void Call(Run& r) {
  if (r.p.h_q == 64) {
    sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<
        ModelType::V32, 64>(r.p);
  } else {
    sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<
        ModelType::V32, 128>(r.p);
  }
  smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(r.combine);
  if (r.with_wuv) {
    peer::WuvProduct(r.blas, r.w_uv, r.p.out, r.projected, r.rows, r.heads,
                     r.v);
  }
}

int RunOne(const Config& c) {
  const int heads = c.heads, nreq = c.requests, context = c.context,
            mtp = c.mtp, topk = c.topk;
  if ((heads != 64 && heads != 128) || nreq < 1 || mtp < 1 || topk < 64 ||
      topk % 64 != 0 || context < topk || context % kPage != 0 || c.v < 1 ||
      c.iters < 1) {
    std::fprintf(stderr,
                 "bad sizes (heads 64 or 128; topk a multiple of 64; context "
                 ">= topk, a multiple of 64; v >= 1)\n");
    return 2;
  }
  const int64_t rows = int64_t{nreq} * mtp;
  const int64_t max_blocks = context / kPage;
  int64_t num_blocks = nreq * max_blocks;
  const int64_t cap = (int64_t{256} << 20) / (int64_t{kEntry} * kPage);
  if (num_blocks > cap) num_blocks = cap;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  std::vector<int32_t> table(nreq * max_blocks);
  for (auto& b : table) b = static_cast<int32_t>(Next(s) % num_blocks);
  std::vector<int32_t> idx(rows * topk);
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t r = t / mtp;
    int64_t seq = 1;
    while (seq < context) seq *= 2;
    // a j + b mod a power of two >= context, skipping positions past it:
    // topk distinct positions of the request.
    const int64_t a = 2 * (Next(s) % (seq / 2)) + 1, b = Next(s) % seq;
    int j = 0;
    for (int64_t k = 0; j < topk; ++k) {
      const int64_t pos = (a * k + b) % seq;
      if (pos >= context) continue;
      idx[t * topk + j++] = static_cast<int32_t>(
          table[r * max_blocks + pos / kPage] * kPage + pos % kPage);
    }
  }
  std::vector<uint8_t> cache(num_blocks * kPage * kEntry);
  for (int64_t e = 0; e < num_blocks * kPage; ++e) {
    uint8_t* p = cache.data() + e * kEntry;
    for (int d = 0; d < kLora; ++d) {
      uint8_t code = static_cast<uint8_t>(Next(s));
      if ((code & 0x7f) == 0x7f) code ^= 1;  // no NaN
      p[d] = code;
    }
    for (int g = 0; g < 4; ++g) {
      const float scale = std::ldexp(1.0f, -6 - static_cast<int>(Next(s) % 3));
      std::memcpy(p + kLora + 4 * g, &scale, 4);
    }
    for (int d = 0; d < kRope; ++d) {
      const uint16_t x = RandomBf16(s);
      std::memcpy(p + kLora + 16 + 2 * d, &x, 2);
    }
  }
  std::vector<uint16_t> q(rows * heads * kDim);
  for (auto& x : q) x = RandomBf16(s);
  std::vector<uint16_t> w(int64_t{heads} * kLora * c.v);
  for (auto& x : w) x = RandomBf16(s);

  Run r{};
  SparseAttnDecodeParams& p = r.p;
  const int num_sms = [] {
    int device = 0, n = 0;
    PEER_CHECK(cudaGetDevice(&device));
    PEER_CHECK(
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  // FlashMLA's sm_90 decode: max(SMs / s_q / (h_q / 64), 1) parts, a fixed
  // overhead of 5 blocks of 64 a request (csrc/api/sparse_decode.h).
  const int num_sm_parts = std::max(num_sms / mtp / (heads / 64), 1);
  void *d_q, *d_kv, *d_idx, *d_out, *d_lse, *d_meta, *d_splits, *d_lse_acc,
      *d_o_acc, *d_w, *d_proj;
  PEER_CHECK(cudaMalloc(&d_q, q.size() * 2));
  PEER_CHECK(cudaMalloc(&d_kv, cache.size()));
  PEER_CHECK(cudaMalloc(&d_idx, idx.size() * 4));
  PEER_CHECK(cudaMalloc(&d_out, rows * heads * kLora * 2));
  PEER_CHECK(cudaMalloc(&d_lse, rows * heads * 4));
  PEER_CHECK(
      cudaMalloc(&d_meta, int64_t{num_sm_parts} * sizeof(DecodingSchedMeta)));
  PEER_CHECK(cudaMalloc(&d_splits, (nreq + 1) * 4));
  const int64_t total_splits = nreq + num_sm_parts;
  PEER_CHECK(cudaMalloc(&d_lse_acc, total_splits * mtp * heads * 4));
  PEER_CHECK(cudaMalloc(&d_o_acc, total_splits * mtp * heads * kLora * 4));
  PEER_CHECK(cudaMalloc(&d_w, w.size() * 2));
  PEER_CHECK(cudaMalloc(&d_proj, rows * heads * c.v * 2));
  PEER_CHECK(cudaMemcpy(d_w, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  PEER_CHECK(cudaMemcpy(d_q, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  PEER_CHECK(
      cudaMemcpy(d_kv, cache.data(), cache.size(), cudaMemcpyHostToDevice));
  PEER_CHECK(
      cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  PEER_CHECK(cudaStreamCreate(&stream));
  if (cublasCreate(&r.blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(r.blas, stream) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublas handle\n");
    return 1;
  }
  r.w_uv = d_w;
  r.projected = d_proj;
  r.rows = static_cast<int>(rows);
  r.heads = heads;
  r.v = c.v;
  r.with_wuv = false;

  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  p.b = nreq;
  p.s_q = mtp;
  p.h_q = heads;
  p.h_kv = 1;
  p.d_qk = kDim;
  p.d_v = kLora;
  p.sm_scale = scale;
  p.sm_scale_div_log2 = scale * 1.4426950408889634f;
  p.num_blocks = static_cast<int>(num_blocks);
  p.page_block_size = kPage;
  p.topk = topk;
  p.model_type = ModelType::V32;
  p.q = static_cast<cutlass::bfloat16_t*>(d_q);
  p.kv = static_cast<cutlass::bfloat16_t*>(d_kv);
  p.indices = static_cast<int*>(d_idx);
  p.lse = static_cast<float*>(d_lse);
  p.out = static_cast<cutlass::bfloat16_t*>(d_out);
  p.stride_q_b = mtp * heads * kDim;
  p.stride_q_s_q = heads * kDim;
  p.stride_q_h_q = kDim;
  p.stride_kv_block = kPage * kEntry;
  p.stride_kv_row = kEntry;
  p.stride_indices_b = mtp * topk;
  p.stride_indices_s_q = topk;
  p.stride_lse_b = mtp * heads;
  p.stride_lse_s_q = heads;
  p.stride_o_b = mtp * heads * kLora;
  p.stride_o_s_q = heads * kLora;
  p.stride_o_h_q = kLora;
  p.stream = stream;
  p.lse_accum = static_cast<float*>(d_lse_acc);
  p.o_accum = static_cast<float*>(d_o_acc);
  p.stride_lse_accum_split = mtp * heads;
  p.stride_lse_accum_s_q = heads;
  p.stride_o_accum_split = mtp * heads * kLora;
  p.stride_o_accum_s_q = heads * kLora;
  p.stride_o_accum_h_q = kLora;
  p.tile_scheduler_metadata_ptr = static_cast<DecodingSchedMeta*>(d_meta);
  p.num_splits_ptr = static_cast<int*>(d_splits);
  p.num_sm_parts = num_sm_parts;

  GetDecodeSchedMetaParams meta{};
  meta.b = nreq;
  meta.s_q = mtp;
  meta.block_size_n = 64;
  meta.fixed_overhead_num_blocks = 5;
  meta.topk = topk;
  meta.extra_topk = -1;
  meta.topk_length = nullptr;
  meta.extra_topk_length = nullptr;
  meta.seqlens_k_ptr = nullptr;
  meta.tile_scheduler_metadata_ptr = p.tile_scheduler_metadata_ptr;
  meta.num_splits_ptr = p.num_splits_ptr;
  meta.num_sm_parts = num_sm_parts;
  meta.stream = stream;
  smxx::decode::run_get_decoding_sched_meta_kernel(meta);

  CombineParams& cb = r.combine;
  cb.b = nreq;
  cb.s_q = mtp;
  cb.h_q = heads;
  cb.d_v = kLora;
  cb.lse = p.lse;
  cb.out = p.out;
  cb.stride_lse_b = p.stride_lse_b;
  cb.stride_lse_s_q = p.stride_lse_s_q;
  cb.stride_o_b = p.stride_o_b;
  cb.stride_o_s_q = p.stride_o_s_q;
  cb.stride_o_h_q = p.stride_o_h_q;
  cb.lse_accum = p.lse_accum;
  cb.o_accum = p.o_accum;
  cb.stride_lse_accum_split = p.stride_lse_accum_split;
  cb.stride_lse_accum_s_q = p.stride_lse_accum_s_q;
  cb.stride_o_accum_split = p.stride_o_accum_split;
  cb.stride_o_accum_s_q = p.stride_o_accum_s_q;
  cb.stride_o_accum_h_q = p.stride_o_accum_h_q;
  cb.tile_scheduler_metadata_ptr = p.tile_scheduler_metadata_ptr;
  cb.num_splits_ptr = p.num_splits_ptr;
  cb.num_sm_parts = num_sm_parts;
  cb.attn_sink = nullptr;
  cb.stream = stream;

  PEER_CHECK(cudaMemset(d_out, 0xff, rows * heads * kLora * 2));
  Call(r);
  PEER_CHECK(cudaStreamSynchronize(stream));
  double worst = 0;
  for (const int64_t t : {int64_t{0}, rows - 1}) {
    std::vector<uint16_t> got(int64_t{heads} * kLora);
    PEER_CHECK(cudaMemcpy(got.data(),
                          static_cast<uint8_t*>(d_out) + t * heads * kLora * 2,
                          got.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<std::vector<double>> keys(topk, std::vector<double>(kDim));
    for (int j = 0; j < topk; ++j) {
      const uint8_t* e = cache.data() + int64_t{idx[t * topk + j]} * kEntry;
      for (int d = 0; d < kLora; ++d) {
        float sc;
        std::memcpy(&sc, e + kLora + 4 * (d / 128), 4);
        keys[j][d] = E4m3(e[d]) * sc;
      }
      for (int d = 0; d < kRope; ++d) {
        uint16_t x;
        std::memcpy(&x, e + kLora + 16 + 2 * d, 2);
        keys[j][kLora + d] = Bf16ToFloat(x);
      }
    }
    for (int h = 0; h < heads; ++h) {
      worst = std::max(worst, peer::HeadWorstError(
                                  q.data() + (t * heads + h) * kDim, keys, kDim,
                                  kLora, scale, got.data() + h * kLora));
    }
  }
  if (!(worst <= 1.0 / 64)) {
    std::fprintf(
        stderr, "flashmla decode: worst error %g of the output scale\n", worst);
    return 1;
  }
  const auto call = [&] { Call(r); };
  const float ms = peer::MedianMs(call, stream, c.iters);
  const float queued = peer::QueuedMs(call, stream, c.iters);
  r.with_wuv = true;
  const float wuv_ms = peer::MedianMs(call, stream, c.iters);
  const float wuv_queued = peer::QueuedMs(call, stream, c.iters);
  const double flops =
      static_cast<double>(rows) * heads * 2.0 * topk * (kDim + kLora);
  std::printf(
      "flashmla_sparse_decode cache=fp8 heads=%d requests=%d mtp=%d "
      "context=%d topk=%d v=%d sm_parts=%d median_ms=%.4f queued_ms=%.4f "
      "tflops=%.1f with_wuv_ms=%.4f with_wuv_queued_ms=%.4f "
      "check_worst=%.2g\n",
      heads, nreq, mtp, context, topk, c.v, num_sm_parts, ms, queued,
      flops / (ms * 1e-3) / 1e12, wuv_ms, wuv_queued, worst);
  cublasDestroy(r.blas);
  PEER_CHECK(cudaStreamDestroy(stream));
  for (void* ptr : {d_q, d_kv, d_idx, d_out, d_lse, d_meta, d_splits, d_lse_acc,
                    d_o_acc, d_w, d_proj}) {
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
                        {"requests", &c.requests},
                        {"context", &c.context},
                        {"mtp", &c.mtp},
                        {"topk", &c.topk},
                        {"v", &c.v},
                        {"iters", &c.iters}},
                       [&] { return RunOne(c); });
}
