// The HIP runtime entry points the ROCm platform calls: the one list from
// which platform/runtime_library.h generates both the struct of function
// pointers and its loader (see the example there). HIP's headers are not
// included, so nothing needs them at build time: hipError_t, hipMemcpyKind and
// hipDevice_t are int-sized enums and ints in HIP's C ABI.
//
// Rows: DSA_HIP_REQUIRED(name, ret, args) — a runtime without it is refused at
// load; DSA_HIP_OPTIONAL(name, ret, args) — may be null, checked where used.
// The includer defines both macros; this file undefines them. No include
// guard: it is meant to be included once per expansion.

#ifndef DSA_HIP_REQUIRED
#error "define DSA_HIP_REQUIRED(name, ret, args) first"
#endif
#ifndef DSA_HIP_OPTIONAL
#error "define DSA_HIP_OPTIONAL(name, ret, args) first"
#endif

// Device probe.
DSA_HIP_REQUIRED(hipGetDeviceCount, int, (int* count))
DSA_HIP_REQUIRED(hipRuntimeGetVersion, int, (int* version))
DSA_HIP_REQUIRED(hipDeviceGetName, int, (char* name, int len, int device))
DSA_HIP_REQUIRED(hipDeviceTotalMem, int, (size_t * bytes, int device))

// Memory and synchronisation on the current device (device 0 unless the
// host selected another).
DSA_HIP_REQUIRED(hipMalloc, int, (void** ptr, size_t size))
DSA_HIP_REQUIRED(hipFree, int, (void* ptr))
DSA_HIP_REQUIRED(hipMemcpy, int,
                 (void* dst, const void* src, size_t size, int kind))
DSA_HIP_REQUIRED(hipDeviceSynchronize, int, ())

// Streams (hipStream_t, an opaque pointer) and copies ordered on them.
DSA_HIP_REQUIRED(hipStreamCreateWithFlags, int, (void** stream, unsigned flags))
DSA_HIP_REQUIRED(hipStreamDestroy, int, (void* stream))
DSA_HIP_REQUIRED(hipStreamSynchronize, int, (void* stream))
DSA_HIP_REQUIRED(hipMemcpyAsync, int,
                 (void* dst, const void* src, size_t size, int kind,
                  void* stream))

// The calling thread's device (plugin API 1.3's device_bind); without it only
// device 0 can be bound.
DSA_HIP_OPTIONAL(hipSetDevice, int, (int device))

// Page-locked host memory (hipHostRegisterPortable: for every device); a
// runtime without them pages host memory in for each copy.
DSA_HIP_OPTIONAL(hipHostRegister, int, (void* ptr, size_t size, unsigned flags))
DSA_HIP_OPTIONAL(hipHostUnregister, int, (void* ptr))

// Only for error messages; a numeric code is printed without it.
DSA_HIP_OPTIONAL(hipGetErrorString, const char*, (int error))
DSA_HIP_OPTIONAL(hipMemGetInfo, int, (size_t * free, size_t* total))

#undef DSA_HIP_REQUIRED
#undef DSA_HIP_OPTIONAL
