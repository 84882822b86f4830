// cuBLASLt, loaded at run time with dlopen (as the CUDA driver is), for the
// CUDA platform's bf16 matrix products (the gemm dense op,
// attention/dense_ops.h) and block-scaled fp8 ones (fp8_block_gemm). Nothing
// links cuBLASLt at build time: a machine without it builds, and the GEMM falls
// back to the project's own kernel.
//
// The few cuBLASLt constants used are spelled out here (values from
// cublasLt.h / library_types.h, stable across CUDA 11-13), since the header
// is not included. Free of Abseil (used inside plugin shared objects).
#ifndef DSA_PLATFORM_CUDA_CUBLASLT_H_
#define DSA_PLATFORM_CUDA_CUBLASLT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "platform/runtime_library.h"

namespace dsa::platform::cuda {

struct CublasLtApi {
#define DSA_CUBLASLT_REQUIRED DSA_RUNTIME_SYMBOL_FIELD
#define DSA_CUBLASLT_OPTIONAL DSA_RUNTIME_SYMBOL_FIELD
#include "platform/cuda/cublaslt_symbols.h"

  void Resolve(RuntimeSymbolResolver& resolver) {
#define DSA_CUBLASLT_REQUIRED DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED
#define DSA_CUBLASLT_OPTIONAL DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL
#include "platform/cuda/cublaslt_symbols.h"
  }
};

// cuBLASLt's constants.
inline constexpr int kCublasStatusSuccess = 0;
inline constexpr int kCublasStatusNotInitialized = 1;
inline constexpr int kCublasStatusAllocFailed = 3;
inline constexpr int kCublasStatusInvalidValue = 7;
inline constexpr int kCublasStatusArchMismatch = 8;
inline constexpr int kCublasStatusMappingError = 11;
inline constexpr int kCublasStatusExecutionFailed = 13;
inline constexpr int kCublasStatusInternalError = 14;
inline constexpr int kCublasStatusNotSupported = 15;
inline constexpr int kCublasStatusLicenseError = 16;
inline constexpr int kCudaR32F = 0;
inline constexpr int kCudaR16BF = 14;
inline constexpr int kCublasCompute32F = 68;
inline constexpr int kCublasOpN = 0;
inline constexpr int kCublasOpT = 1;
inline constexpr int kMatmulDescTransA = 3;
inline constexpr int kMatmulDescTransB = 4;
inline constexpr int kLayoutBatchCount = 5;
inline constexpr int kLayoutStridedBatchOffset = 6;
// Block-scaled fp8 (cuBLAS 12.9 and later, Hopper): e4m3 operands, a
// float32 scale per 128 elements of the inner dim (VEC128) or per 128 x 128
// block (BLK128x128), set per matrix with its scale mode and pointer.
inline constexpr int kCudaR8FE4M3 = 28;
inline constexpr int kMatmulDescAScalePointer = 17;
inline constexpr int kMatmulDescBScalePointer = 18;
inline constexpr int kMatmulDescAScaleMode = 31;
inline constexpr int kMatmulDescBScaleMode = 32;
inline constexpr int kMatmulMatrixScaleVec128F32 = 4;
inline constexpr int kMatmulMatrixScaleBlk128x128F32 = 5;
inline constexpr int kPrefMaxWorkspaceBytes = 1;
inline constexpr int kPrefMinAlignmentABytes = 5;  // B, C, D: 6, 7, 8
// sizeof(cublasLtMatmulHeuristicResult_t): a 64-byte algo, size_t workspace
// size, int state, float waves, int reserved[4].
struct CublasLtHeuristicResult {
  uint64_t algo[8];
  size_t workspace_size;
  int state;
  float waves_count;
  int reserved[4];
};

// "CUBLAS_STATUS_EXECUTION_FAILED", ... ("unknown cuBLAS status" otherwise).
inline const char* CublasStatusName(int status) {
  switch (status) {
    case kCublasStatusSuccess:
      return "CUBLAS_STATUS_SUCCESS";
    case kCublasStatusNotInitialized:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case kCublasStatusAllocFailed:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case kCublasStatusInvalidValue:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case kCublasStatusArchMismatch:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case kCublasStatusMappingError:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case kCublasStatusExecutionFailed:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case kCublasStatusInternalError:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case kCublasStatusNotSupported:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case kCublasStatusLicenseError:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "unknown cuBLAS status";
  }
}

// A status that says the library cannot do this product here (a layout, an
// arch), the same every time: the caller takes its own kernel instead. Any
// other failure is an error of this call.
inline bool CublasStatusIsUnsupported(int status) {
  return status == kCublasStatusNotSupported ||
         status == kCublasStatusArchMismatch ||
         status == kCublasStatusInvalidValue;
}

// The library, loaded once per process (thread-safe). The candidates are
// DSA_CUBLASLT_LIBRARY when set, then libcublasLt.so.13, .so.12, .so.
const CublasLtApi* LoadedCublasLt();
// How the load went (library opened, or why not), for errors and reports.
const RuntimeLoadResult& CublasLtLoadResult();

}  // namespace dsa::platform::cuda

#endif  // DSA_PLATFORM_CUDA_CUBLASLT_H_
