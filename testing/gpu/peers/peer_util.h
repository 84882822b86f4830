// What the peer harnesses (flashmla_sparse_prefill.cu, _decode.cu) share:
// the error check, the bench's random draws (sparse_mla/bench.cc's
// xorshift and bf16 values), the command line, the W_UV product that makes
// "FlashMLA + W_UV" the same work as our op, and the two timings the bench
// takes (the median of single calls, the host waiting for each, and the
// time a call of calls queued back to back).
#ifndef DSA_TESTING_GPU_PEERS_PEER_UTIL_H_
#define DSA_TESTING_GPU_PEERS_PEER_UTIL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#define PEER_CHECK(call)                                                 \
  do {                                                                   \
    const cudaError_t e_ = (call);                                       \
    if (e_ != cudaSuccess) {                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(e_));                              \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

namespace peer {

inline uint64_t Next(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

inline float Bf16ToFloat(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Uniform in [-1, 1), truncated to bf16 (any bf16 will do).
inline uint16_t RandomBf16(uint64_t& s) {
  const float f = static_cast<float>(Next(s) >> 40) / 16777216.0f * 2 - 1;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

// projected[t, h, :v] = o[t, h, :512] W_UV[h] for `rows` rows (bf16, fp32
// accumulation): per head, (rows x 512) times (512 x v); column-major,
// C^T (v x rows) = W^T (v x 512) O^T (512 x rows), O^T's columns strided by
// heads * 512. Exits on a cuBLAS error.
inline void WuvProduct(cublasHandle_t blas, const void* w_uv, const void* o,
                       void* projected, int rows, int heads, int v) {
  constexpr int kLatent = 512;
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t st = cublasGemmStridedBatchedEx(
      blas, CUBLAS_OP_N, CUBLAS_OP_N, v, rows, kLatent, &one, w_uv, CUDA_R_16BF,
      v, int64_t{kLatent} * v, o, CUDA_R_16BF, heads * kLatent, kLatent, &zero,
      projected, CUDA_R_16BF, heads * v, v, heads, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasGemmStridedBatchedEx: %d\n",
                 static_cast<int>(st));
    std::exit(1);
  }
}

// The worst error of one head's output against float64 attention, relative
// to the output's largest magnitude: got (bf16, `lora` values) against
// o = sum_j softmax_j(scale q . k_j) k_j[:lora], for q (bf16, `dim`
// values) and keys[j] (`dim` values each).
inline double HeadWorstError(const uint16_t* q,
                             const std::vector<std::vector<double>>& keys,
                             int dim, int lora, double scale,
                             const uint16_t* got) {
  std::vector<double> sc(keys.size());
  double mx = -1e300;
  for (size_t j = 0; j < keys.size(); ++j) {
    double d = 0;
    for (int e = 0; e < dim; ++e) d += double{Bf16ToFloat(q[e])} * keys[j][e];
    sc[j] = d * scale;
    mx = std::max(mx, sc[j]);
  }
  double sum = 0;
  for (double& x : sc) sum += (x = std::exp(x - mx));
  std::vector<double> o(lora, 0.0);
  for (size_t j = 0; j < keys.size(); ++j) {
    for (int e = 0; e < lora; ++e) o[e] += sc[j] / sum * keys[j][e];
  }
  double vmax = 0, worst = 0;
  for (double x : o) vmax = std::max(vmax, std::fabs(x));
  for (int e = 0; e < lora; ++e) {
    worst = std::max(worst, std::fabs(Bf16ToFloat(got[e]) - o[e]) / vmax);
  }
  return worst;
}

// --name=N into *out.
inline bool Parse(const char* arg, const char* name, int* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, "--", 2) != 0 || std::strncmp(arg + 2, name, n) != 0 ||
      arg[2 + n] != '=') {
    return false;
  }
  *out = std::atoi(arg + 3 + n);
  return true;
}

// A flag of the command line and where its value goes.
struct Flag {
  const char* name;
  int* value;
};

// The harnesses' command line: flags (--name=N, kept from one run to the
// next) and --then between runs; run() after each group. The runs' codes
// or'ed, or 2 for an unknown flag.
template <class Run>
int RunEach(int argc, char** argv, std::initializer_list<Flag> flags,
            Run&& run) {
  int rc = 0;
  for (int i = 1; i <= argc; ++i) {
    if (i == argc || std::strcmp(argv[i], "--then") == 0) {
      rc |= run();
      continue;
    }
    bool known = false;
    for (const Flag& f : flags)
      known = known || Parse(argv[i], f.name, f.value);
    if (!known) {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  return rc;
}

// The median of `iters` single calls of `call` on `stream`, each waited
// for, after 3 warm-up calls.
template <class Call>
float MedianMs(Call&& call, cudaStream_t stream, int iters) {
  cudaEvent_t a, b;
  PEER_CHECK(cudaEventCreate(&a));
  PEER_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) call();
  PEER_CHECK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    PEER_CHECK(cudaEventRecord(a, stream));
    call();
    PEER_CHECK(cudaEventRecord(b, stream));
    PEER_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PEER_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  PEER_CHECK(cudaEventDestroy(a));
  PEER_CHECK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

// The time a call of `iters` calls queued back to back, after 3 warm-ups.
template <class Call>
float QueuedMs(Call&& call, cudaStream_t stream, int iters) {
  cudaEvent_t a, b;
  PEER_CHECK(cudaEventCreate(&a));
  PEER_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) call();
  PEER_CHECK(cudaDeviceSynchronize());
  PEER_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) call();
  PEER_CHECK(cudaEventRecord(b, stream));
  PEER_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  PEER_CHECK(cudaEventElapsedTime(&ms, a, b));
  PEER_CHECK(cudaEventDestroy(a));
  PEER_CHECK(cudaEventDestroy(b));
  return ms / iters;
}

}  // namespace peer

#endif  // DSA_TESTING_GPU_PEERS_PEER_UTIL_H_
