// The NCCL entry points the GPU platforms call for collectives among the
// ranks of one process: the one list from which platform/runtime_library.h
// generates the struct of function pointers and its loader. RCCL (ROCm)
// exports the same C API under the same names and enum values, so one list
// serves both. nccl.h is not included: in its C ABI ncclResult_t,
// ncclDataType_t and ncclRedOp_t are int-sized enums, ncclComm_t and the
// stream opaque pointers.
//
// Rows: DSA_NCCL_REQUIRED(name, ret, args) — a library without it is refused
// at load; DSA_NCCL_OPTIONAL(name, ret, args) — may be null, checked where
// used. The includer defines both macros; this file undefines them. No
// include guard: it is meant to be included once per expansion.

#ifndef DSA_NCCL_REQUIRED
#error "define DSA_NCCL_REQUIRED(name, ret, args) first"
#endif
#ifndef DSA_NCCL_OPTIONAL
#error "define DSA_NCCL_OPTIONAL(name, ret, args) first"
#endif

DSA_NCCL_REQUIRED(ncclGetVersion, int, (int* version))
DSA_NCCL_REQUIRED(ncclCommInitAll, int,
                  (void** comms, int num_devices, const int* devices))
DSA_NCCL_REQUIRED(ncclCommDestroy, int, (void* comm))
DSA_NCCL_REQUIRED(ncclAllReduce, int,
                  (const void* send, void* recv, size_t count, int type, int op,
                   void* comm, void* stream))
DSA_NCCL_REQUIRED(ncclAllGather, int,
                  (const void* send, void* recv, size_t send_count, int type,
                   void* comm, void* stream))
// A rank whose peer failed aborts instead of waiting in a collective forever.
DSA_NCCL_OPTIONAL(ncclCommAbort, int, (void* comm))
// Only for error messages; a numeric code is printed without them.
DSA_NCCL_OPTIONAL(ncclGetErrorString, const char*, (int result))
DSA_NCCL_OPTIONAL(ncclGetLastError, const char*, (void* comm))

#undef DSA_NCCL_REQUIRED
#undef DSA_NCCL_OPTIONAL
