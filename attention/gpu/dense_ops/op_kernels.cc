#include "attention/gpu/dense_ops/op_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/dense_ops/plan_cache.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/launch_status.h"
#include "attention/gpu/device/runtime.h"
#include "attention/kernel_abi.h"
#include "attention/kernel_descriptor.h"
#include "platform/cuda/cublaslt.h"
#include "platform/fault_injection.h"
#include "platform/rocm/rocblas.h"
#include "platform/stream_release.h"

namespace dsa::attention::gpu {
namespace {

namespace lt = ::dsa::platform::cuda;

bool OnCuda() {
  static const bool on_cuda = std::strcmp(GpuBackend(), "cuda") == 0;
  return on_cuda;
}
bool OnRocm() {
  static const bool on_rocm = std::strcmp(GpuBackend(), "rocm") == 0;
  return on_rocm;
}

// ---------------------------------------------------------------------------
// cuBLASLt. Column-major: y^T [out, rows] = op(A) [out, in] * x^T [in, rows],
// with A = w read as [in, out] (transposed) when w's in dim is contiguous,
// else as [out, in]. Plans (descriptors + the heuristic's algorithm) are
// kept per shape, strides and alignment in a PlanCache (plan_cache.h: found
// without a lock from the thread's own entries, at most kMaxPlans, the
// least recently used dropped); a workspace is kept per stream, found from
// the thread's last streams. The handle is made once, shared by every
// thread (cublasLtMatmul takes the stream and workspace per call).

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's Hopper advice

// The largest power of two (up to 256) dividing the address.
int Alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// Everything a plan depends on.
struct PlanKey {
  int64_t batch = 0, rows = 0, in = 0, out = 0;
  int64_t x_row_stride = 0, x_batch_stride = 0;
  int64_t w_stride = 0, w_batch_stride = 0;
  int64_t y_row_stride = 0, y_batch_stride = 0;
  int32_t w_row_major = 0, y_type = 0, align_x = 0, align_w = 0, align_y = 0;
  bool operator==(const PlanKey& o) const {
    return batch == o.batch && rows == o.rows && in == o.in && out == o.out &&
           x_row_stride == o.x_row_stride &&
           x_batch_stride == o.x_batch_stride && w_stride == o.w_stride &&
           w_batch_stride == o.w_batch_stride &&
           y_row_stride == o.y_row_stride &&
           y_batch_stride == o.y_batch_stride && w_row_major == o.w_row_major &&
           y_type == o.y_type && align_x == o.align_x && align_w == o.align_w &&
           align_y == o.align_y;
  }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = 1469598103934665603u;  // FNV-1a over the fields
    for (int64_t v :
         {k.batch, k.rows, k.in, k.out, k.x_row_stride, k.x_batch_stride,
          k.w_stride, k.w_batch_stride, k.y_row_stride, k.y_batch_stride,
          int64_t{k.w_row_major}, int64_t{k.y_type}, int64_t{k.align_x},
          int64_t{k.align_w}, int64_t{k.align_y}}) {
      h = (h ^ static_cast<uint64_t>(v)) * 1099511628211u;
    }
    return static_cast<size_t>(h);
  }
};

struct Plan {
  bool ok = false;
  void* desc = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* d = nullptr;
  lt::CublasLtHeuristicResult heuristic{};
};

void DestroyPlan(const lt::CublasLtApi& api, const Plan& plan) {
  if (plan.desc) api.cublasLtMatmulDescDestroy(plan.desc);
  for (void* l : {plan.a, plan.b, plan.d}) {
    if (l) api.cublasLtMatrixLayoutDestroy(l);
  }
}

// Plans of this many shapes at most (a step at one batch size uses about a
// dozen).
constexpr size_t kMaxPlans = 512;

struct LtState {
  std::mutex mu;  // making the handle; a stream's first workspace
  std::atomic<void*> handle{nullptr};
  std::atomic<bool> handle_failed{false};
  std::map<void*, void*> workspaces;  // stream -> device buffer (under mu)
  // Moves on each workspace given back, so the threads' caches drop theirs.
  std::atomic<uint64_t> workspaces_epoch{0};
  PlanCache<PlanKey, Plan, PlanKeyHash> plans{kMaxPlans};
};

LtState& State();

// A platform stream about to be destroyed (platform/stream_release.h): its
// workspace is freed once the stream's work is done, so that a later stream
// at its address gets a workspace of its own, as a stream never seen does.
void ReleaseWorkspaceOfStream(void* stream) {
  LtState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto it = s.workspaces.find(stream);
  if (it == s.workspaces.end()) return;
  if (it->second != nullptr) {
    // Nothing to report from a stream's destruction: a stream that failed
    // has failed its last call already.
    (void)StreamSynchronize(stream);
    (void)DeviceFree(it->second);
  }
  s.workspaces.erase(it);
  s.workspaces_epoch.fetch_add(1, std::memory_order_release);
}

LtState& State() {
  static LtState* const state = [] {
    LtState* s = new LtState();
    // A full table leaves workspaces for the process's life, as before.
    (void)platform::AddStreamReleaseHook(&ReleaseWorkspaceOfStream);
    return s;
  }();
  return *state;
}

// The calling thread's last streams' workspaces, valid while the state's
// epoch is the one they were found at.
struct CachedWorkspace {
  void* stream = nullptr;
  void* workspace = nullptr;
  uint64_t epoch = 0;
};
constexpr int kCachedWorkspaces = 4;
thread_local CachedWorkspace t_workspaces[kCachedWorkspaces];
thread_local int t_next_workspace = 0;

// A call into the vendor library that a test's FaultInjector can make fail
// (platform/fault_injection.h): `call()`'s status, or `injected`, the
// library's status of such a call failing (never one that says the product
// is unsupported: a passing fault must not change which kernel runs it).
template <class Call>
int Blas(int injected, Call&& call) {
  return platform::FaultInjected(platform::FaultSite::kVendorBlas) ? injected
                                                                   : call();
}

// cuBLASLt's first algorithm for plan's description and layouts within the
// workspace and the operands' alignments (A, B, C, D bytes) into
// plan->heuristic: kCublasStatusSuccess, kCublasStatusNotSupported when it
// has none, or the failed call's status.
int FindAlgorithm(const lt::CublasLtApi& api, void* handle,
                  const uint32_t aligns[4], Plan* plan) {
  constexpr int kAllocFailed = lt::kCublasStatusAllocFailed;
  constexpr int kInternal = lt::kCublasStatusInternalError;
  void* pref = nullptr;
  if (int st = Blas(kAllocFailed,
                    [&] { return api.cublasLtMatmulPreferenceCreate(&pref); });
      st != lt::kCublasStatusSuccess) {
    return st;
  }
  const uint64_t workspace = kWorkspaceBytes;
  int status = Blas(kInternal, [&] {
    return api.cublasLtMatmulPreferenceSetAttribute(
        pref, lt::kPrefMaxWorkspaceBytes, &workspace, sizeof(workspace));
  });
  for (int i = 0; i < 4 && status == lt::kCublasStatusSuccess; ++i) {
    status = Blas(kInternal, [&] {
      return api.cublasLtMatmulPreferenceSetAttribute(
          pref, lt::kPrefMinAlignmentABytes + i, &aligns[i], sizeof(aligns[i]));
    });
  }
  int returned = 0;
  if (status == lt::kCublasStatusSuccess) {
    status = Blas(kInternal, [&] {
      return api.cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a,
                                                plan->b, plan->d, plan->d, pref,
                                                1, &plan->heuristic, &returned);
    });
  }
  api.cublasLtMatmulPreferenceDestroy(pref);
  if (status != lt::kCublasStatusSuccess) return status;
  return returned < 1 ? lt::kCublasStatusNotSupported : status;
}

// Builds a plan into *out: kCublasStatusSuccess with out->ok when cuBLASLt
// has an algorithm, with out->ok false when it has none for this layout (a
// fact of the shape, cached); another status when a call failed (nothing is
// kept, the next call tries again).
int MakePlan(const lt::CublasLtApi& api, void* handle, const GemmParams& p,
             bool w_row_major, int align_x, int align_w, int align_y,
             Plan* out) {
  Plan plan;
  const int y_type =
      p.y_type == FloatFormat::kBFloat16 ? lt::kCudaR16BF : lt::kCudaR32F;
  auto fail = [&](int status) {
    DestroyPlan(api, plan);
    *out = Plan();
    return lt::CublasStatusIsUnsupported(status) ? lt::kCublasStatusSuccess
                                                 : status;
  };
  constexpr int kAllocFailed = lt::kCublasStatusAllocFailed;
  constexpr int kInternal = lt::kCublasStatusInternalError;
  if (int st = Blas(kAllocFailed,
                    [&] {
                      return api.cublasLtMatmulDescCreate(
                          &plan.desc, lt::kCublasCompute32F, lt::kCudaR32F);
                    });
      st != lt::kCublasStatusSuccess) {
    return fail(st);
  }
  const int trans_a = w_row_major ? lt::kCublasOpT : lt::kCublasOpN;
  const int trans_b = lt::kCublasOpN;
  for (const auto& [attribute, value] :
       {std::pair<int, const int*>{lt::kMatmulDescTransA, &trans_a},
        std::pair<int, const int*>{lt::kMatmulDescTransB, &trans_b}}) {
    if (int st = Blas(kInternal,
                      [&, attribute = attribute, value = value] {
                        return api.cublasLtMatmulDescSetAttribute(
                            plan.desc, attribute, value, sizeof(*value));
                      });
        st != lt::kCublasStatusSuccess) {
      return fail(st);
    }
  }
  const uint64_t a_rows = w_row_major ? p.in : p.out;
  const uint64_t a_cols = w_row_major ? p.out : p.in;
  const int64_t a_ld =
      std::max<int64_t>(w_row_major ? p.w_out_stride : p.w_in_stride,
                        static_cast<int64_t>(a_rows));
  const int64_t b_ld = std::max<int64_t>(p.x_row_stride, p.in);
  const int64_t d_ld = std::max<int64_t>(p.y_row_stride, p.out);
  const struct {
    void** layout;
    int type;
    uint64_t rows, cols;
    int64_t ld;
  } layouts[] = {{&plan.a, lt::kCudaR16BF, a_rows, a_cols, a_ld},
                 {&plan.b, lt::kCudaR16BF, static_cast<uint64_t>(p.in),
                  static_cast<uint64_t>(p.rows), b_ld},
                 {&plan.d, y_type, static_cast<uint64_t>(p.out),
                  static_cast<uint64_t>(p.rows), d_ld}};
  for (const auto& l : layouts) {
    if (int st = Blas(kAllocFailed,
                      [&] {
                        return api.cublasLtMatrixLayoutCreate(
                            l.layout, l.type, l.rows, l.cols, l.ld);
                      });
        st != lt::kCublasStatusSuccess) {
      return fail(st);
    }
  }
  if (p.batch > 1) {
    const int32_t count = static_cast<int32_t>(p.batch);
    const struct {
      void* layout;
      int64_t stride;
    } batched[] = {{plan.a, p.w_batch_stride},
                   {plan.b, p.x_batch_stride},
                   {plan.d, p.y_batch_stride}};
    for (const auto& l : batched) {
      int st = Blas(kInternal, [&] {
        return api.cublasLtMatrixLayoutSetAttribute(
            l.layout, lt::kLayoutBatchCount, &count, sizeof(count));
      });
      if (st == lt::kCublasStatusSuccess) {
        st = Blas(kInternal, [&] {
          return api.cublasLtMatrixLayoutSetAttribute(
              l.layout, lt::kLayoutStridedBatchOffset, &l.stride,
              sizeof(l.stride));
        });
      }
      if (st != lt::kCublasStatusSuccess) return fail(st);
    }
  }
  const uint32_t aligns[4] = {
      static_cast<uint32_t>(align_w), static_cast<uint32_t>(align_x),
      static_cast<uint32_t>(align_y), static_cast<uint32_t>(align_y)};
  if (int st = FindAlgorithm(api, handle, aligns, &plan);
      st != lt::kCublasStatusSuccess) {
    return fail(st);
  }
  plan.ok = true;
  *out = plan;
  return lt::kCublasStatusSuccess;
}

// A vendor library's failed call as the gemm op's error: out of memory is
// RESOURCE_EXHAUSTED, anything else INTERNAL.
Status VendorError(bool out_of_memory, const char* call, const char* name,
                   int status) {
  return Status(
      out_of_memory ? DSA_STATUS_RESOURCE_EXHAUSTED : DSA_STATUS_INTERNAL,
      StrCat("gemm: ", call, " failed: ", name, " (", status, ")"));
}
Status CublasError(const char* call, int status) {
  return VendorError(status == lt::kCublasStatusAllocFailed, call,
                     lt::CublasStatusName(status), status);
}

// The process's cuBLASLt handle and `stream`'s workspace, created on first
// use (a hit takes no lock: the handle is an atomic, the workspace found in
// the calling thread's cache): *handle null when no usable library is here
// (no driver, an arch it does not know), the own kernel from then on; an
// error for a failure of this call.
Status Acquire(const lt::CublasLtApi& api, LtState& s, void* stream,
               void** handle, void** workspace) {
  *handle = nullptr;
  void* h = s.handle.load(std::memory_order_acquire);
  if (h == nullptr) {
    if (s.handle_failed.load(std::memory_order_relaxed)) return OkStatus();
    std::lock_guard<std::mutex> lock(s.mu);
    h = s.handle.load(std::memory_order_relaxed);
    if (h == nullptr) {
      if (s.handle_failed.load(std::memory_order_relaxed)) return OkStatus();
      const int st = Blas(lt::kCublasStatusAllocFailed,
                          [&] { return api.cublasLtCreate(&h); });
      if (st != lt::kCublasStatusSuccess) {
        // No usable library here (no driver, an arch it does not know): the
        // own kernel from now on. Anything else is this call's error.
        if (st == lt::kCublasStatusNotInitialized ||
            lt::CublasStatusIsUnsupported(st)) {
          s.handle_failed.store(true, std::memory_order_relaxed);
          return OkStatus();
        }
        return CublasError("cublasLtCreate", st);
      }
      s.handle.store(h, std::memory_order_release);
    }
  }
  void* ws = nullptr;
  const uint64_t epoch = s.workspaces_epoch.load(std::memory_order_acquire);
  for (const CachedWorkspace& c : t_workspaces) {
    if (c.workspace != nullptr && c.stream == stream && c.epoch == epoch) {
      ws = c.workspace;
      break;
    }
  }
  if (ws == nullptr) {
    std::lock_guard<std::mutex> lock(s.mu);
    void*& slot = s.workspaces[stream];
    if (slot == nullptr) {
      const LaunchResult r = DeviceMalloc(&slot, kWorkspaceBytes);
      if (!r.ok()) {
        slot = nullptr;
        return Status(DSA_STATUS_RESOURCE_EXHAUSTED,
                      StrCat("gemm: cuBLASLt's workspace of ", kWorkspaceBytes,
                             " bytes: ", r.message));
      }
    }
    ws = slot;
    t_workspaces[t_next_workspace] = {
        stream, ws, s.workspaces_epoch.load(std::memory_order_relaxed)};
    t_next_workspace = (t_next_workspace + 1) % kCachedWorkspaces;
  }
  *handle = h;
  *workspace = ws;
  return OkStatus();
}

// Runs p on cuBLASLt: OK with *done when it ran, OK without when cuBLASLt
// cannot take this product (not loaded, not bf16, no algorithm: the caller
// falls back to its own kernel, the same way every time), an error when a
// call failed (out of memory, an execution failure), so that a product's
// numerics never depend on a passing failure.
Status TryCublasLt(const GemmParams& p, bool w_row_major, void* stream,
                   bool* done) {
  *done = false;
  if (p.x_type != FloatFormat::kBFloat16 || !OnCuda()) return OkStatus();
  const lt::CublasLtApi* api = lt::LoadedCublasLt();
  if (api == nullptr) return OkStatus();
  if (p.batch > 0x7fffffff) return OkStatus();
  LtState& s = State();
  void* handle = nullptr;
  void* workspace = nullptr;
  DSA_RETURN_IF_ERROR(Acquire(*api, s, stream, &handle, &workspace));
  if (handle == nullptr) return OkStatus();
  const int align_x = Alignment(p.x), align_w = Alignment(p.w),
            align_y = Alignment(p.y);
  PlanKey key;
  key.batch = p.batch;
  key.rows = p.rows;
  key.in = p.in;
  key.out = p.out;
  key.x_row_stride = p.x_row_stride;
  key.x_batch_stride = p.x_batch_stride;
  key.w_stride = w_row_major ? p.w_out_stride : p.w_in_stride;
  key.w_batch_stride = p.w_batch_stride;
  key.y_row_stride = p.y_row_stride;
  key.y_batch_stride = p.y_batch_stride;
  key.w_row_major = w_row_major;
  key.y_type = static_cast<int32_t>(p.y_type);
  key.align_x = align_x;
  key.align_w = align_w;
  key.align_y = align_y;
  int plan_status = lt::kCublasStatusSuccess;
  const Plan* found = s.plans.Find(key, [&]() -> std::shared_ptr<const Plan> {
    Plan made;
    plan_status = MakePlan(*api, handle, p, w_row_major, align_x, align_w,
                           align_y, &made);
    if (plan_status != lt::kCublasStatusSuccess) return nullptr;
    return std::shared_ptr<const Plan>(new Plan(made), [api](const Plan* q) {
      DestroyPlan(*api, *q);
      delete q;
    });
  });
  if (found == nullptr) {
    return CublasError("planning cublasLtMatmul", plan_status);
  }
  const Plan& plan = *found;
  if (!plan.ok) return OkStatus();
  const float alpha = 1.0f, beta = 0.0f;
  const int st = Blas(lt::kCublasStatusExecutionFailed, [&] {
    return api->cublasLtMatmul(
        handle, plan.desc, &alpha, p.w, plan.a, p.x, plan.b, &beta, p.y, plan.d,
        p.y, plan.d, plan.heuristic.algo, workspace, kWorkspaceBytes, stream);
  });
  if (st == lt::kCublasStatusSuccess) {
    *done = true;
    return OkStatus();
  }
  if (lt::CublasStatusIsUnsupported(st)) return OkStatus();
  return CublasError("cublasLtMatmul", st);
}

// ---------------------------------------------------------------------------
// cuBLASLt's block-scaled fp8 product (cuBLAS 12.9+, Hopper), the same
// column-major mapping as the bf16 one: D [out, rows] = A^T B with
// A = w read as [in, out] (its rows are the columns of A), scaled per
// 128 x 128 block (BLK128x128_32F), and B = the quantised activations
// [in, rows], scaled per 128 of their in dim (VEC128_32F). cuBLASLt reads
// the BLK128x128 scales of A K-block-major, [ceil(out / 128)] rows of
// round_up(ceil(in / 128), 4) (PyTorch's _scaled_mm layout for these
// recipes): a checkpoint's row-major weight_scale_inv when its row stride is
// that, which every projection of the models has (in a multiple of 512).
// The VEC128 scales of B are token-major, [ceil(in / 128)][rows], 16-byte
// aligned: what the op's own quantisation writes, and what a caller's
// quantised activations (x_q, x_scale_inv) must be laid out as to take this
// path (other layouts run on the own kernel).

struct Fp8PlanKey {
  int64_t rows = 0, in = 0, out = 0, w_ld = 0, x_ld = 0, y_ld = 0;
  int32_t y_type = 0, align_w = 0, align_x = 0, align_y = 0;
  bool operator==(const Fp8PlanKey& o) const {
    return rows == o.rows && in == o.in && out == o.out && w_ld == o.w_ld &&
           x_ld == o.x_ld && y_ld == o.y_ld && y_type == o.y_type &&
           align_w == o.align_w && align_x == o.align_x && align_y == o.align_y;
  }
};
struct Fp8PlanKeyHash {
  size_t operator()(const Fp8PlanKey& k) const {
    uint64_t h = 1469598103934665603u;  // FNV-1a over the fields
    for (int64_t v :
         {k.rows, k.in, k.out, k.w_ld, k.x_ld, k.y_ld, int64_t{k.y_type},
          int64_t{k.align_w}, int64_t{k.align_x}, int64_t{k.align_y}}) {
      h = (h ^ static_cast<uint64_t>(v)) * 1099511628211u;
    }
    return static_cast<size_t>(h);
  }
};

// The block-scaled plans (bounded as the bf16 ones), whose descriptors carry
// the scale pointers of the call: `launch` is held from setting them through
// the matmul's launch, so that two threads never run one descriptor with
// each other's scales.
struct Fp8LtState {
  PlanCache<Fp8PlanKey, Plan, Fp8PlanKeyHash> plans{kMaxPlans};
  std::mutex launch;
  std::atomic<int64_t> shapes_taken{0}, shapes_declined{0};
};
Fp8LtState& Fp8State() {
  static Fp8LtState* const state = new Fp8LtState();
  return *state;
}

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Whether cuBLASLt's block-scaled recipe can take p's layout at all (before
// asking it for an algorithm); otherwise the own kernel runs it.
bool Fp8LayoutFitsCublasLt(const Fp8GemmParams& p) {
  const int64_t k_blocks = (p.in + 127) / 128;
  const int y_bytes = p.y_type == FloatFormat::kBFloat16 ? 2 : 4;
  return !p.fnuz && p.in > 0 && p.in % 128 == 0 && p.out % 16 == 0 &&
         p.w_row_stride % 16 == 0 && p.x_q_row_stride % 16 == 0 &&
         Alignment(p.x_q) >= 16 && Alignment(p.x_scales) >= 16 &&
         p.x_scale_row_stride == 1 && p.x_scale_group_stride == p.rows &&
         (p.y_row_stride * y_bytes) % 16 == 0 &&
         p.w_scale_row_stride == RoundUp(k_blocks, 4) && p.rows <= 0x7fffffff;
}

int MakeFp8Plan(const lt::CublasLtApi& api, void* handle,
                const Fp8GemmParams& p, int align_w, int align_x, int align_y,
                Plan* out) {
  Plan plan;
  const int y_type =
      p.y_type == FloatFormat::kBFloat16 ? lt::kCudaR16BF : lt::kCudaR32F;
  auto fail = [&](int status) {
    DestroyPlan(api, plan);
    *out = Plan();
    return lt::CublasStatusIsUnsupported(status) ? lt::kCublasStatusSuccess
                                                 : status;
  };
  constexpr int kAllocFailed = lt::kCublasStatusAllocFailed;
  constexpr int kInternal = lt::kCublasStatusInternalError;
  if (int st = Blas(kAllocFailed,
                    [&] {
                      return api.cublasLtMatmulDescCreate(
                          &plan.desc, lt::kCublasCompute32F, lt::kCudaR32F);
                    });
      st != lt::kCublasStatusSuccess) {
    return fail(st);
  }
  const int32_t trans_a = lt::kCublasOpT, trans_b = lt::kCublasOpN;
  const int32_t a_mode = lt::kMatmulMatrixScaleBlk128x128F32;
  const int32_t b_mode = lt::kMatmulMatrixScaleVec128F32;
  for (const auto& [attribute, value] :
       {std::pair<int, const int32_t*>{lt::kMatmulDescTransA, &trans_a},
        std::pair<int, const int32_t*>{lt::kMatmulDescTransB, &trans_b},
        std::pair<int, const int32_t*>{lt::kMatmulDescAScaleMode, &a_mode},
        std::pair<int, const int32_t*>{lt::kMatmulDescBScaleMode, &b_mode}}) {
    if (int st = Blas(kInternal,
                      [&, attribute = attribute, value = value] {
                        return api.cublasLtMatmulDescSetAttribute(
                            plan.desc, attribute, value, sizeof(*value));
                      });
        st != lt::kCublasStatusSuccess) {
      return fail(st);
    }
  }
  // The scale pointers of this call, so that the heuristic sees a complete
  // description; every call sets its own before it runs.
  const void* a_scale = p.w_scales;
  const void* b_scale = p.x_scales;
  for (const auto& [attribute, value] :
       {std::pair<int, const void* const*>{lt::kMatmulDescAScalePointer,
                                           &a_scale},
        std::pair<int, const void* const*>{lt::kMatmulDescBScalePointer,
                                           &b_scale}}) {
    if (int st = Blas(kInternal,
                      [&, attribute = attribute, value = value] {
                        return api.cublasLtMatmulDescSetAttribute(
                            plan.desc, attribute, value, sizeof(*value));
                      });
        st != lt::kCublasStatusSuccess) {
      return fail(st);
    }
  }
  const struct {
    void** layout;
    int type;
    uint64_t rows, cols;
    int64_t ld;
  } layouts[] = {{&plan.a, lt::kCudaR8FE4M3, static_cast<uint64_t>(p.in),
                  static_cast<uint64_t>(p.out), p.w_row_stride},
                 {&plan.b, lt::kCudaR8FE4M3, static_cast<uint64_t>(p.in),
                  static_cast<uint64_t>(p.rows), p.x_q_row_stride},
                 {&plan.d, y_type, static_cast<uint64_t>(p.out),
                  static_cast<uint64_t>(p.rows), p.y_row_stride}};
  for (const auto& l : layouts) {
    if (int st = Blas(kAllocFailed,
                      [&] {
                        return api.cublasLtMatrixLayoutCreate(
                            l.layout, l.type, l.rows, l.cols, l.ld);
                      });
        st != lt::kCublasStatusSuccess) {
      return fail(st);
    }
  }
  // A: the weight, B: the activations, C and D.
  const uint32_t aligns[4] = {
      static_cast<uint32_t>(align_w), static_cast<uint32_t>(align_x),
      static_cast<uint32_t>(align_y), static_cast<uint32_t>(align_y)};
  if (int st = FindAlgorithm(api, handle, aligns, &plan);
      st != lt::kCublasStatusSuccess) {
    return fail(st);
  }
  plan.ok = true;
  *out = plan;
  return lt::kCublasStatusSuccess;
}

// As TryCublasLt, for the block-scaled fp8 product of already quantised
// activations.
Status TryCublasLtFp8(const Fp8GemmParams& p, void* stream, bool* done) {
  *done = false;
  if (!OnCuda() || !Fp8LayoutFitsCublasLt(p)) return OkStatus();
  const lt::CublasLtApi* api = lt::LoadedCublasLt();
  if (api == nullptr) return OkStatus();
  void* handle = nullptr;
  void* workspace = nullptr;
  DSA_RETURN_IF_ERROR(Acquire(*api, State(), stream, &handle, &workspace));
  if (handle == nullptr) return OkStatus();
  const int align_w = Alignment(p.w), align_x = Alignment(p.x_q),
            align_y = Alignment(p.y);
  Fp8PlanKey key;
  key.rows = p.rows;
  key.in = p.in;
  key.out = p.out;
  key.w_ld = p.w_row_stride;
  key.x_ld = p.x_q_row_stride;
  key.y_ld = p.y_row_stride;
  key.y_type = static_cast<int32_t>(p.y_type);
  key.align_w = align_w;
  key.align_x = align_x;
  key.align_y = align_y;
  Fp8LtState& f = Fp8State();
  int plan_status = lt::kCublasStatusSuccess;
  const Plan* found = f.plans.Find(key, [&]() -> std::shared_ptr<const Plan> {
    Plan made;
    plan_status =
        MakeFp8Plan(*api, handle, p, align_w, align_x, align_y, &made);
    if (plan_status != lt::kCublasStatusSuccess) return nullptr;
    (made.ok ? f.shapes_taken : f.shapes_declined)
        .fetch_add(1, std::memory_order_relaxed);
    return std::shared_ptr<const Plan>(new Plan(made), [api](const Plan* q) {
      DestroyPlan(*api, *q);
      delete q;
    });
  });
  if (found == nullptr) {
    return CublasError("planning the block-scaled fp8 cublasLtMatmul",
                       plan_status);
  }
  const Plan& plan = *found;
  if (!plan.ok) return OkStatus();
  std::lock_guard<std::mutex> lock(f.launch);
  const void* a_scale = p.w_scales;
  const void* b_scale = p.x_scales;
  for (const auto& [attribute, value] :
       {std::pair<int, const void* const*>{lt::kMatmulDescAScalePointer,
                                           &a_scale},
        std::pair<int, const void* const*>{lt::kMatmulDescBScalePointer,
                                           &b_scale}}) {
    if (int st = Blas(lt::kCublasStatusInternalError,
                      [&, attribute = attribute, value = value] {
                        return api->cublasLtMatmulDescSetAttribute(
                            plan.desc, attribute, value, sizeof(*value));
                      });
        st != lt::kCublasStatusSuccess) {
      return CublasError("setting the fp8 scales", st);
    }
  }
  const float alpha = 1.0f, beta = 0.0f;
  const int st = Blas(lt::kCublasStatusExecutionFailed, [&] {
    return api->cublasLtMatmul(handle, plan.desc, &alpha, p.w, plan.a, p.x_q,
                               plan.b, &beta, p.y, plan.d, p.y, plan.d,
                               plan.heuristic.algo, workspace, kWorkspaceBytes,
                               stream);
  });
  if (st == lt::kCublasStatusSuccess) {
    *done = true;
    return OkStatus();
  }
  if (lt::CublasStatusIsUnsupported(st)) return OkStatus();
  return CublasError("block-scaled fp8 cublasLtMatmul", st);
}

// ---------------------------------------------------------------------------
// rocBLAS, the same column-major mapping: D [out, rows] = op(A) B with
// A = w ([in, out] transposed when its in dim is contiguous), B = x.
// A handle per thread (rocBLAS handles are not to be shared between
// threads), set to a stream only when the thread's stream changes: no lock.

namespace rb = ::dsa::platform::rocm;

Status RocblasError(const char* call, int status) {
  return VendorError(status == rb::kRocblasStatusMemoryError, call,
                     rb::RocblasStatusName(status), status);
}

// The calling thread's handle, destroyed when the thread ends.
struct RocblasThreadHandle {
  const rb::RocblasApi* api = nullptr;
  void* handle = nullptr;
  void* stream = nullptr;  // the stream the handle is set to
  bool stream_set = false;
  ~RocblasThreadHandle() {
    if (handle != nullptr) api->rocblas_destroy_handle(handle);
  }
};
thread_local RocblasThreadHandle t_rocblas;
// rocBLAS cannot run here (a handle could not be made for a reason that
// does not pass): the own kernel from now on, on every thread.
std::atomic<bool> g_rocblas_unusable{false};

// As TryCublasLt, on rocBLAS.
Status TryRocblas(const GemmParams& p, bool w_row_major, void* stream,
                  bool* done) {
  *done = false;
  if (p.x_type != FloatFormat::kBFloat16 || !OnRocm()) return OkStatus();
  const rb::RocblasApi* api = rb::LoadedRocblas();
  if (api == nullptr) return OkStatus();
  constexpr int64_t kMaxInt = 0x7fffffff;
  const int64_t lda = std::max<int64_t>(
      w_row_major ? p.w_out_stride : p.w_in_stride, w_row_major ? p.in : p.out);
  const int64_t ldb = std::max<int64_t>(p.x_row_stride, p.in);
  const int64_t ldd = std::max<int64_t>(p.y_row_stride, p.out);
  for (int64_t v : {p.out, p.rows, p.in, p.batch, lda, ldb, ldd}) {
    if (v > kMaxInt) return OkStatus();  // rocblas_int is 32-bit
  }
  RocblasThreadHandle& h = t_rocblas;
  if (h.handle == nullptr) {
    if (g_rocblas_unusable.load(std::memory_order_relaxed)) return OkStatus();
    void* handle = nullptr;
    const int st = Blas(rb::kRocblasStatusMemoryError,
                        [&] { return api->rocblas_create_handle(&handle); });
    if (st != rb::kRocblasStatusSuccess) {
      if (rb::RocblasStatusIsUnsupported(st)) {
        g_rocblas_unusable.store(true, std::memory_order_relaxed);
        return OkStatus();
      }
      return RocblasError("rocblas_create_handle", st);
    }
    h.api = api;
    h.handle = handle;
    h.stream_set = false;
  }
  if (!h.stream_set || h.stream != stream) {
    if (const int st =
            Blas(rb::kRocblasStatusInternalError,
                 [&] { return api->rocblas_set_stream(h.handle, stream); });
        st != rb::kRocblasStatusSuccess) {
      h.stream_set = false;
      return RocblasError("rocblas_set_stream", st);
    }
    h.stream = stream;
    h.stream_set = true;
  }
  const int y_type = p.y_type == FloatFormat::kBFloat16
                         ? rb::kRocblasDatatypeBf16
                         : rb::kRocblasDatatypeF32;
  const float alpha = 1.0f, beta = 0.0f;
  const int st = Blas(rb::kRocblasStatusInternalError, [&] {
    return api->rocblas_gemm_strided_batched_ex(
        h.handle,
        w_row_major ? rb::kRocblasOperationTranspose
                    : rb::kRocblasOperationNone,
        rb::kRocblasOperationNone, static_cast<int32_t>(p.out),
        static_cast<int32_t>(p.rows), static_cast<int32_t>(p.in), &alpha, p.w,
        rb::kRocblasDatatypeBf16, static_cast<int32_t>(lda), p.w_batch_stride,
        p.x, rb::kRocblasDatatypeBf16, static_cast<int32_t>(ldb),
        p.x_batch_stride, &beta, p.y, y_type, static_cast<int32_t>(ldd),
        p.y_batch_stride, p.y, y_type, static_cast<int32_t>(ldd),
        p.y_batch_stride, static_cast<int32_t>(p.batch),
        rb::kRocblasDatatypeF32, rb::kRocblasGemmAlgoStandard, 0, 0);
  });
  if (st == rb::kRocblasStatusSuccess) {
    *done = true;
    return OkStatus();
  }
  if (rb::RocblasStatusIsUnsupported(st)) return OkStatus();
  return RocblasError("rocblas_gemm_strided_batched_ex", st);
}

}  // namespace

Status GemmGpu(const ExecutionContext& ctx, const Gemm::Args& a) {
  return GemmGpuOn(ctx, a, GemmBackend::kAuto);
}

Status GemmGpuOn(const ExecutionContext& ctx, const Gemm::Args& a,
                 GemmBackend backend) {
  DSA_RETURN_IF_ERROR(Gemm::Validate(a));
  GemmParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_batch_stride = a.x.stride(0);
  p.x_row_stride = a.x.stride(1);
  p.w = a.w.data_as<const uint16_t>();
  p.w_batch_stride = a.w.stride(0);
  p.w_out_stride = a.w.stride(1);
  p.w_in_stride = a.w.stride(2);
  p.y = a.y.data;
  p.y_type = FloatFormatOf(a.y.dtype);
  p.y_batch_stride = a.y.stride(0);
  p.y_row_stride = a.y.stride(1);
  p.batch = a.x.dim(0);
  p.rows = a.x.dim(1);
  p.in = a.x.dim(2);
  p.out = a.w.dim(1);
  if (p.batch == 0 || p.rows == 0 || p.out == 0) return OkStatus();
  if (backend == GemmBackend::kAuto && p.in > 0) {
    bool done = false;
    DSA_RETURN_IF_ERROR(
        TryCublasLt(p, Gemm::WeightRowMajor(a), ctx.stream, &done));
    if (done) return OkStatus();
    DSA_RETURN_IF_ERROR(
        TryRocblas(p, Gemm::WeightRowMajor(a), ctx.stream, &done));
    if (done) return OkStatus();
  }
  return StatusFromLaunch(GemmTiledLaunch(p, ctx.stream));
}

Status RmsNormGpu(const ExecutionContext& ctx, const RmsNorm::Args& a) {
  DSA_RETURN_IF_ERROR(RmsNorm::Validate(a));
  RmsNormParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_row_stride = a.x.stride(0);
  p.weight = a.weight.data;
  p.weight_type = FloatFormatOf(a.weight.dtype);
  p.weight_stride = a.weight.stride(0);
  p.y = a.y.data;
  p.y_type = FloatFormatOf(a.y.dtype);
  p.y_row_stride = a.y.stride(0);
  p.rows = a.x.dim(0);
  p.dim = a.x.dim(1);
  p.eps = a.eps;
  if (!a.y_q.absent()) {
    p.y_q = a.y_q.data_as<uint8_t>();
    p.y_q_row_stride = a.y_q.stride(0);
    p.y_scales = a.y_scale_inv.data_as<float>();
    p.y_scale_row_stride = a.y_scale_inv.stride(0);
    p.y_scale_col_stride = a.y_scale_inv.stride(1);
    p.traits = Fp8TraitsOf(a.y_q.dtype);
    p.divisor = VllmFp8ScaleDivisor(a.y_q.dtype);
  }
  if (!a.residual.absent()) {
    p.residual = a.residual.data;
    p.residual_type = FloatFormatOf(a.residual.dtype);
    p.residual_row_stride = a.residual.stride(0);
  }
  return StatusFromLaunch(RmsNormLaunch(p, ctx.stream));
}

Status RopeGpu(const ExecutionContext& ctx, const Rope::Args& a) {
  DSA_RETURN_IF_ERROR(Rope::Validate(a));
  RopeParams p;
  p.x = a.x.data;
  p.type = FloatFormatOf(a.x.dtype);
  p.token_stride = a.x.stride(0);
  p.head_stride = a.x.stride(1);
  p.tokens = a.x.dim(0);
  p.heads = a.x.dim(1);
  p.rope_dim = a.x.dim(2);
  p.positions = a.positions.data_as<const int64_t>();
  p.position_stride = a.positions.stride(0);
  p.cos_sin = a.cos_sin_cache.data_as<const float>();
  p.cos_sin_stride = a.cos_sin_cache.stride(0);
  p.max_position = a.cos_sin_cache.dim(0);
  p.neox = a.rope_style == RopeStyle::kNeox;
  return StatusFromLaunch(RopeLaunch(p, ctx.stream));
}

Status ResidualAddGpu(const ExecutionContext& ctx, const ResidualAdd::Args& a) {
  DSA_RETURN_IF_ERROR(ResidualAdd::Validate(a));
  ElementwiseParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_row_stride = a.x.stride(0);
  p.y = a.residual.data;
  p.y_type = FloatFormatOf(a.residual.dtype);
  p.y_row_stride = a.residual.stride(0);
  p.rows = a.x.dim(0);
  p.cols = a.x.dim(1);
  p.accumulate = true;
  return StatusFromLaunch(ElementwiseLaunch(p, ctx.stream));
}

Status CastGpu(const ExecutionContext& ctx, const Cast::Args& a) {
  DSA_RETURN_IF_ERROR(Cast::Validate(a));
  ElementwiseParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_row_stride = a.x.stride(0);
  p.y = a.y.data;
  p.y_type = FloatFormatOf(a.y.dtype);
  p.y_row_stride = a.y.stride(0);
  p.rows = a.x.dim(0);
  p.cols = a.x.dim(1);
  return StatusFromLaunch(ElementwiseLaunch(p, ctx.stream));
}

Status RandomFillGpu(const ExecutionContext& ctx, const RandomFill::Args& a) {
  DSA_RETURN_IF_ERROR(RandomFill::Validate(a));
  RandomFillParams p;
  p.y = a.y.data;
  p.type = FloatFormatOf(a.y.dtype);
  p.n = a.y.num_elements();
  p.seed = a.seed;
  p.stream = a.stream;
  p.scale = a.scale;
  p.offset = a.offset;
  return StatusFromLaunch(RandomFillLaunch(p, ctx.stream));
}

Status Fp8BlockQuantGpu(const ExecutionContext& ctx,
                        const Fp8BlockQuant::Args& a) {
  DSA_RETURN_IF_ERROR(Fp8BlockQuant::Validate(a));
  Fp8QuantParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_row_stride = a.x.stride(0);
  p.q = a.q.data_as<uint8_t>();
  p.q_row_stride = a.q.stride(0);
  p.scales = a.scale_inv.data_as<float>();
  p.scale_row_stride = a.scale_inv.stride(0);
  p.scale_col_stride = a.scale_inv.stride(1);
  p.rows = a.x.dim(0);
  p.cols = a.x.dim(1);
  p.block_rows = a.block_rows;
  p.traits = Fp8TraitsOf(a.q.dtype);
  p.divisor = VllmFp8ScaleDivisor(a.q.dtype);
  return StatusFromLaunch(Fp8QuantLaunch(p, ctx.stream));
}

Status Fp8BlockGemmGpu(const ExecutionContext& ctx,
                       const Fp8BlockGemm::Args& a) {
  return Fp8BlockGemmGpuOn(ctx, a, GemmBackend::kAuto);
}

Status Fp8BlockGemmGpuOn(const ExecutionContext& ctx,
                         const Fp8BlockGemm::Args& a, GemmBackend backend) {
  DSA_RETURN_IF_ERROR(Fp8BlockGemm::Validate(a));
  const bool quantised = !a.x_q.absent();
  const TensorView& act = quantised ? a.x_q : a.x;
  const int64_t rows = act.dim(0), in = act.dim(1), out = a.w.dim(0);
  if (rows == 0 || out == 0) return OkStatus();
  const bool fnuz = a.w.dtype == DType::kFloat8E4m3fnuz;
  Fp8GemmParams p;
  ScratchArenas::Lease lease;
  if (quantised) {
    // The caller's quantisation (rms_norm's y_q, or fp8_block_quant).
    p.x_q = a.x_q.data_as<const uint8_t>();
    p.x_q_row_stride = a.x_q.stride(0);
    p.x_scales = a.x_scale_inv.data_as<const float>();
    p.x_scale_row_stride = a.x_scale_inv.stride(0);
    p.x_scale_group_stride = a.x_scale_inv.stride(1);
  } else {
    // The activations quantised per token and 128 columns into scratch:
    // codes in rows of a multiple of 16 bytes (vendor fp8 layouts want
    // 16-byte leading dims), scales token-major (cuBLASLt's VEC128 layout).
    // The scratch is the stream's arena (device/scratch_arena.h), held until
    // the product is enqueued: a call that fits what the stream holds (after
    // a profile run at the largest step) allocates nothing.
    const int64_t groups = Fp8Blocks(in);
    const int64_t x_ld = std::max<int64_t>(16, RoundUp(in, 16));
    DeviceFeatures features;
    DSA_RETURN_IF_ERROR(StatusFromLaunch(CurrentDeviceFeatures(&features)));
    ScratchLayout layout;
    const size_t q_at = layout.Add(static_cast<size_t>(rows * x_ld));
    const size_t scales_at =
        layout.Add(static_cast<size_t>(std::max<int64_t>(groups, 1) * rows) *
                   sizeof(float));
    DSA_RETURN_IF_ERROR(StatusFromLaunch(AcquireStreamScratch(
        ctx.stream, features.device, layout.bytes(),
        "fp8_block_gemm scratch for the quantised activations", &lease)));
    uint8_t* x_q = lease.base() + q_at;
    float* x_scales = reinterpret_cast<float*>(lease.base() + scales_at);
    Fp8QuantParams q;
    q.x = a.x.data;
    q.x_type = FloatFormatOf(a.x.dtype);
    q.x_row_stride = a.x.stride(0);
    q.q = x_q;
    q.q_row_stride = x_ld;
    q.scales = x_scales;
    q.scale_row_stride = 1;
    q.scale_col_stride = rows;
    q.rows = rows;
    q.cols = in;
    q.block_rows = 1;
    q.traits = Fp8TraitsOf(a.w.dtype);
    q.divisor = VllmFp8ScaleDivisor(a.w.dtype);
    DSA_RETURN_IF_ERROR(StatusFromLaunch(Fp8QuantLaunch(q, ctx.stream)));
    p.x_q = x_q;
    p.x_q_row_stride = x_ld;
    p.x_scales = x_scales;
    p.x_scale_row_stride = 1;
    p.x_scale_group_stride = rows;
  }
  p.w = a.w.data_as<const uint8_t>();
  p.w_row_stride = a.w.stride(0);
  p.w_scales = a.w_scale_inv.data_as<const float>();
  p.w_scale_row_stride = a.w_scale_inv.stride(0);
  p.y = a.y.data;
  p.y_type = FloatFormatOf(a.y.dtype);
  p.y_row_stride = a.y.stride(0);
  p.rows = rows;
  p.in = in;
  p.out = out;
  p.fnuz = fnuz;
  if (backend == GemmBackend::kAuto) {
    bool done = false;
    DSA_RETURN_IF_ERROR(TryCublasLtFp8(p, ctx.stream, &done));
    if (done) return OkStatus();
  }
  return StatusFromLaunch(Fp8GemmTiledLaunch(p, ctx.stream));
}

std::string GpuFp8GemmBackend() {
  const std::string own =
      "own kernel (Fp8WarpMma tiles; block scales applied per 128-column "
      "group)";
  if (OnRocm()) {
    return own +
           "; hipBLASLt: its VEC128_32F and BLK128x128_32F scale modes are "
           "documented as not supported yet";
  }
  if (!OnCuda()) return "none (built without a GPU backend)";
  const platform::RuntimeLoadResult& r = lt::CublasLtLoadResult();
  if (!r.loaded()) return own + " (cuBLASLt: " + r.detail + ")";
  const int64_t taken = Fp8State().shapes_taken.load(std::memory_order_relaxed);
  const int64_t declined =
      Fp8State().shapes_declined.load(std::memory_order_relaxed);
  return "cublaslt block-scaled (BLK128x128_32F weights x VEC128_32F "
         "activations, " +
         r.library + "): " + std::to_string(taken) + " shapes planned, " +
         std::to_string(declined) +
         " without an algorithm; layouts it cannot take (in % 128, out % 16, "
         "e4m3fnuz) and those: " +
         own;
}

void AppendGpuDenseKernelDescriptors(const char* platform_id,
                                     std::vector<DsaKernelDescriptor>* out) {
#define DSA_GPU_DENSE_KERNEL_DESCRIPTOR(CxxName, LIST, PREFIX) \
  out->push_back(KernelDescriptorFor<CxxName>(                 \
      platform_id, &CKernel<CxxName, &CxxName##Gpu>));
  DSA_DENSE_OPS(DSA_GPU_DENSE_KERNEL_DESCRIPTOR)
#undef DSA_GPU_DENSE_KERNEL_DESCRIPTOR
}

std::string GpuGemmBackend() {
  if (OnRocm()) {
    const platform::RuntimeLoadResult& r = rb::RocblasLoadResult();
    if (!r.loaded()) return "tiled (rocBLAS: " + r.detail + ")";
    return "rocblas (" + r.library + "; fp32 x and fallbacks: tiled)";
  }
  if (!OnCuda()) return "tiled (built without a GPU backend)";
  const platform::RuntimeLoadResult& r = lt::CublasLtLoadResult();
  if (!r.loaded()) return "tiled (cuBLASLt: " + r.detail + ")";
  std::string s = "cublaslt (" + r.library;
  if (const lt::CublasLtApi* api = lt::LoadedCublasLt();
      api != nullptr && api->cublasLtGetVersion != nullptr) {
    s += ", version " + std::to_string(api->cublasLtGetVersion());
  }
  return s + "; fp32 x and fallbacks: tiled)";
}

}  // namespace dsa::attention::gpu
