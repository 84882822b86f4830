// The cuBLASLt entry points the CUDA GEMM kernel calls: one X-macro list from
// which platform/runtime_library.h generates the struct of function pointers
// and its loader (see cuda_symbols.h, the driver's list, for the pattern).
// cublasLt.h is not included, so nothing needs the CUDA toolkit at build
// time: in cuBLASLt's C ABI cublasStatus_t, cudaDataType_t,
// cublasComputeType_t and the attribute enums are int-sized enums, the
// handle and descriptors opaque pointers, cudaStream_t an opaque pointer.
//
// Rows: DSA_CUBLASLT_REQUIRED(name, ret, args) — a library without it is
// refused at load; DSA_CUBLASLT_OPTIONAL(name, ret, args) — may be null. The
// includer defines both macros; this file undefines them. No include guard:
// it is meant to be included once per expansion.

#ifndef DSA_CUBLASLT_REQUIRED
#error "define DSA_CUBLASLT_REQUIRED(name, ret, args) first"
#endif
#ifndef DSA_CUBLASLT_OPTIONAL
#error "define DSA_CUBLASLT_OPTIONAL(name, ret, args) first"
#endif

DSA_CUBLASLT_REQUIRED(cublasLtCreate, int, (void** handle))
DSA_CUBLASLT_REQUIRED(cublasLtDestroy, int, (void* handle))
DSA_CUBLASLT_REQUIRED(cublasLtMatmulDescCreate, int,
                      (void** desc, int compute_type, int scale_type))
DSA_CUBLASLT_REQUIRED(cublasLtMatmulDescDestroy, int, (void* desc))
DSA_CUBLASLT_REQUIRED(cublasLtMatmulDescSetAttribute, int,
                      (void* desc, int attr, const void* buf, size_t size))
DSA_CUBLASLT_REQUIRED(cublasLtMatrixLayoutCreate, int,
                      (void** layout, int type, uint64_t rows, uint64_t cols,
                       int64_t ld))
DSA_CUBLASLT_REQUIRED(cublasLtMatrixLayoutDestroy, int, (void* layout))
DSA_CUBLASLT_REQUIRED(cublasLtMatrixLayoutSetAttribute, int,
                      (void* layout, int attr, const void* buf, size_t size))
DSA_CUBLASLT_REQUIRED(cublasLtMatmulPreferenceCreate, int, (void** pref))
DSA_CUBLASLT_REQUIRED(cublasLtMatmulPreferenceDestroy, int, (void* pref))
DSA_CUBLASLT_REQUIRED(cublasLtMatmulPreferenceSetAttribute, int,
                      (void* pref, int attr, const void* buf, size_t size))
// heuristic_results: cublasLtMatmulHeuristicResult_t[requested].
DSA_CUBLASLT_REQUIRED(cublasLtMatmulAlgoGetHeuristic, int,
                      (void* handle, void* desc, void* a, void* b, void* c,
                       void* d, void* pref, int requested,
                       void* heuristic_results, int* returned))
DSA_CUBLASLT_REQUIRED(cublasLtMatmul, int,
                      (void* handle, void* desc, const void* alpha,
                       const void* a, void* a_layout, const void* b,
                       void* b_layout, const void* beta, const void* c,
                       void* c_layout, void* d, void* d_layout,
                       const void* algo, void* workspace,
                       size_t workspace_bytes, void* stream))

// For reports only.
DSA_CUBLASLT_OPTIONAL(cublasLtGetVersion, size_t, ())

#undef DSA_CUBLASLT_REQUIRED
#undef DSA_CUBLASLT_OPTIONAL
