// rocBLAS, loaded at run time with dlopen (as the HIP runtime is), for the
// ROCm platform's bf16 matrix products (the gemm dense op,
// attention/dense_ops.h). Nothing links rocBLAS at build time: without it the
// GEMM runs on the project's own kernel.
//
// The few rocBLAS constants used are spelled out here (values from rocblas's
// rocblas-types.h, stable across ROCm 5 and 6). Free of Abseil.
#ifndef DSA_PLATFORM_ROCM_ROCBLAS_H_
#define DSA_PLATFORM_ROCM_ROCBLAS_H_

#include <cstddef>
#include <cstdint>

#include "platform/runtime_library.h"

namespace dsa::platform::rocm {

struct RocblasApi {
#define DSA_ROCBLAS_REQUIRED DSA_RUNTIME_SYMBOL_FIELD
#define DSA_ROCBLAS_OPTIONAL DSA_RUNTIME_SYMBOL_FIELD
#include "platform/rocm/rocblas_symbols.h"

  void Resolve(RuntimeSymbolResolver& resolver) {
#define DSA_ROCBLAS_REQUIRED DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED
#define DSA_ROCBLAS_OPTIONAL DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL
#include "platform/rocm/rocblas_symbols.h"
  }
};

inline constexpr int kRocblasStatusSuccess = 0;
inline constexpr int kRocblasOperationNone = 111;
inline constexpr int kRocblasOperationTranspose = 112;
inline constexpr int kRocblasDatatypeF32 = 151;
inline constexpr int kRocblasDatatypeBf16 = 168;
inline constexpr int kRocblasGemmAlgoStandard = 0;

// The library, loaded once per process (thread-safe). Candidates:
// DSA_ROCBLAS_LIBRARY when set, then librocblas.so.4, .so.3, .so.0, .so.
const RocblasApi* LoadedRocblas();
const RuntimeLoadResult& RocblasLoadResult();

}  // namespace dsa::platform::rocm

#endif  // DSA_PLATFORM_ROCM_ROCBLAS_H_
