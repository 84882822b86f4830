// The CUDA driver API entry points the CUDA platform calls: the one list from
// which platform/runtime_library.h generates both the struct of function
// pointers and its loader (see the example there). cuda.h is not included, so
// nothing needs CUDA at build time: in the driver's C ABI CUresult and
// CUdevice_attribute are int-sized enums, CUdevice an int, CUdeviceptr an
// unsigned long long and CUcontext an opaque pointer. The versioned names
// (_v2) are the ones cuda.h's macros map the plain names to.
//
// Rows: DSA_CUDA_REQUIRED(name, ret, args) — a driver without it is refused
// at load; DSA_CUDA_OPTIONAL(name, ret, args) — may be null, checked where
// used. The includer defines both macros; this file undefines them. No
// include guard: it is meant to be included once per expansion.

#ifndef DSA_CUDA_REQUIRED
#error "define DSA_CUDA_REQUIRED(name, ret, args) first"
#endif
#ifndef DSA_CUDA_OPTIONAL
#error "define DSA_CUDA_OPTIONAL(name, ret, args) first"
#endif

// Initialisation and device probe.
DSA_CUDA_REQUIRED(cuInit, int, (unsigned flags))
DSA_CUDA_REQUIRED(cuDriverGetVersion, int, (int* version))
DSA_CUDA_REQUIRED(cuDeviceGetCount, int, (int* count))
DSA_CUDA_REQUIRED(cuDeviceGet, int, (int* device, int ordinal))
DSA_CUDA_REQUIRED(cuDeviceGetName, int, (char* name, int len, int device))
DSA_CUDA_REQUIRED(cuDeviceGetAttribute, int,
                  (int* value, int attribute, int device))
DSA_CUDA_REQUIRED(cuDeviceTotalMem_v2, int, (size_t * bytes, int device))

// Device 0's primary context, shared with the runtime API that nvcc-built
// kernels use.
DSA_CUDA_REQUIRED(cuDevicePrimaryCtxRetain, int, (void** context, int device))
DSA_CUDA_REQUIRED(cuCtxGetCurrent, int, (void** context))
DSA_CUDA_REQUIRED(cuCtxSetCurrent, int, (void* context))
DSA_CUDA_REQUIRED(cuCtxSynchronize, int, ())

// Memory.
DSA_CUDA_REQUIRED(cuMemAlloc_v2, int, (unsigned long long* ptr, size_t size))
DSA_CUDA_REQUIRED(cuMemFree_v2, int, (unsigned long long ptr))
DSA_CUDA_REQUIRED(cuMemcpyHtoD_v2, int,
                  (unsigned long long dst, const void* src, size_t size))
DSA_CUDA_REQUIRED(cuMemcpyDtoH_v2, int,
                  (void* dst, unsigned long long src, size_t size))
DSA_CUDA_REQUIRED(cuMemcpyDtoD_v2, int,
                  (unsigned long long dst, unsigned long long src, size_t size))

// Streams (CUstream, an opaque pointer: the cudaStream_t of the runtime API
// the kernels use) and copies ordered on them.
DSA_CUDA_REQUIRED(cuStreamCreate, int, (void** stream, unsigned flags))
DSA_CUDA_REQUIRED(cuStreamDestroy_v2, int, (void* stream))
DSA_CUDA_REQUIRED(cuStreamSynchronize, int, (void* stream))
DSA_CUDA_REQUIRED(cuMemcpyHtoDAsync_v2, int,
                  (unsigned long long dst, const void* src, size_t size,
                   void* stream))
DSA_CUDA_REQUIRED(cuMemcpyDtoHAsync_v2, int,
                  (void* dst, unsigned long long src, size_t size,
                   void* stream))
DSA_CUDA_REQUIRED(cuMemcpyDtoDAsync_v2, int,
                  (unsigned long long dst, unsigned long long src, size_t size,
                   void* stream))

// Graphs (CUgraph and CUgraphExec, opaque pointers): a stream's work
// recorded and launched again. A driver without them has no graphs.
DSA_CUDA_OPTIONAL(cuStreamBeginCapture_v2, int, (void* stream, int mode))
DSA_CUDA_OPTIONAL(cuStreamEndCapture, int, (void* stream, void** graph))
DSA_CUDA_OPTIONAL(cuGraphInstantiateWithFlags, int,
                  (void** exec, void* graph, unsigned long long flags))
DSA_CUDA_OPTIONAL(cuGraphLaunch, int, (void* exec, void* stream))
DSA_CUDA_OPTIONAL(cuGraphExecDestroy, int, (void* exec))
DSA_CUDA_OPTIONAL(cuGraphDestroy, int, (void* graph))

// Page-locked host memory (CU_MEMHOSTREGISTER_PORTABLE: for every context).
// A driver without them pages host memory in for each copy.
DSA_CUDA_OPTIONAL(cuMemHostRegister_v2, int,
                  (void* ptr, size_t size, unsigned flags))
DSA_CUDA_OPTIONAL(cuMemHostUnregister, int, (void* ptr))

// Only for error messages; a numeric code is printed without it.
DSA_CUDA_OPTIONAL(cuGetErrorString, int, (int error, const char** text))
DSA_CUDA_OPTIONAL(cuMemGetInfo_v2, int, (size_t * free, size_t* total))

#undef DSA_CUDA_REQUIRED
#undef DSA_CUDA_OPTIONAL
