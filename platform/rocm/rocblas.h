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
inline constexpr int kRocblasStatusInvalidHandle = 1;
inline constexpr int kRocblasStatusNotImplemented = 2;
inline constexpr int kRocblasStatusInvalidPointer = 3;
inline constexpr int kRocblasStatusInvalidSize = 4;
inline constexpr int kRocblasStatusMemoryError = 5;
inline constexpr int kRocblasStatusInternalError = 6;
inline constexpr int kRocblasStatusInvalidValue = 11;
inline constexpr int kRocblasStatusExcludedFromBuild = 14;
inline constexpr int kRocblasStatusArchMismatch = 15;
inline constexpr int kRocblasOperationNone = 111;
inline constexpr int kRocblasOperationTranspose = 112;
inline constexpr int kRocblasDatatypeF32 = 151;
inline constexpr int kRocblasDatatypeBf16 = 168;
inline constexpr int kRocblasGemmAlgoStandard = 0;

// "rocblas_status_internal_error", ... ("unknown rocBLAS status" otherwise).
inline const char* RocblasStatusName(int status) {
  switch (status) {
    case kRocblasStatusSuccess:
      return "rocblas_status_success";
    case kRocblasStatusInvalidHandle:
      return "rocblas_status_invalid_handle";
    case kRocblasStatusNotImplemented:
      return "rocblas_status_not_implemented";
    case kRocblasStatusInvalidPointer:
      return "rocblas_status_invalid_pointer";
    case kRocblasStatusInvalidSize:
      return "rocblas_status_invalid_size";
    case kRocblasStatusMemoryError:
      return "rocblas_status_memory_error";
    case kRocblasStatusInternalError:
      return "rocblas_status_internal_error";
    case kRocblasStatusInvalidValue:
      return "rocblas_status_invalid_value";
    case kRocblasStatusExcludedFromBuild:
      return "rocblas_status_excluded_from_build";
    case kRocblasStatusArchMismatch:
      return "rocblas_status_arch_mismatch";
    default:
      return "unknown rocBLAS status";
  }
}

// A status that says the library cannot do this product here (a size, a
// type, an arch), the same every time: the caller takes its own kernel
// instead. Any other failure is an error of this call.
inline bool RocblasStatusIsUnsupported(int status) {
  return status == kRocblasStatusNotImplemented ||
         status == kRocblasStatusInvalidSize ||
         status == kRocblasStatusInvalidValue ||
         status == kRocblasStatusExcludedFromBuild ||
         status == kRocblasStatusArchMismatch;
}

// The library, loaded once per process (thread-safe). Candidates:
// DSA_ROCBLAS_LIBRARY when set, then librocblas.so.4, .so.3, .so.0, .so.
const RocblasApi* LoadedRocblas();
const RuntimeLoadResult& RocblasLoadResult();

}  // namespace dsa::platform::rocm

#endif  // DSA_PLATFORM_ROCM_ROCBLAS_H_
