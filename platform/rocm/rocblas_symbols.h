// The rocBLAS entry points the ROCm GEMM kernel calls: one X-macro list from
// which platform/runtime_library.h generates the struct of function pointers
// and its loader (cuda_symbols.h shows the pattern). rocblas.h is not
// included, so nothing needs rocBLAS at build time: in rocBLAS's C ABI
// rocblas_status, rocblas_operation, rocblas_datatype and rocblas_gemm_algo
// are int-sized enums, rocblas_int is int32_t (the LP64 build), rocblas_stride
// int64_t, the handle and hipStream_t opaque pointers.
//
// Rows: DSA_ROCBLAS_REQUIRED(name, ret, args) — a library without it is
// refused at load; DSA_ROCBLAS_OPTIONAL(name, ret, args) — may be null. The
// includer defines both macros; this file undefines them. No include guard.

#ifndef DSA_ROCBLAS_REQUIRED
#error "define DSA_ROCBLAS_REQUIRED(name, ret, args) first"
#endif
#ifndef DSA_ROCBLAS_OPTIONAL
#error "define DSA_ROCBLAS_OPTIONAL(name, ret, args) first"
#endif

DSA_ROCBLAS_REQUIRED(rocblas_create_handle, int, (void** handle))
DSA_ROCBLAS_REQUIRED(rocblas_destroy_handle, int, (void* handle))
DSA_ROCBLAS_REQUIRED(rocblas_set_stream, int, (void* handle, void* stream))
DSA_ROCBLAS_REQUIRED(rocblas_gemm_strided_batched_ex, int,
                     (void* handle, int trans_a, int trans_b, int32_t m,
                      int32_t n, int32_t k, const void* alpha, const void* a,
                      int a_type, int32_t lda, int64_t stride_a, const void* b,
                      int b_type, int32_t ldb, int64_t stride_b,
                      const void* beta, const void* c, int c_type, int32_t ldc,
                      int64_t stride_c, void* d, int d_type, int32_t ldd,
                      int64_t stride_d, int32_t batch_count, int compute_type,
                      int algo, int32_t solution_index, uint32_t flags))

// For reports only.
DSA_ROCBLAS_OPTIONAL(rocblas_get_version_string, int,
                     (char* buffer, size_t size))

#undef DSA_ROCBLAS_REQUIRED
#undef DSA_ROCBLAS_OPTIONAL
