/*
 * The C ABI between a host engine and a DeepSeek sparse-attention plugin.
 *
 * A plugin shared object exports exactly one symbol, DsaGetPluginApi, which
 * returns a versioned table (PJRT-style). The host checks the major version
 * (an ABI break) and the struct sizes, then calls `initialize` with a table of
 * host functions through which the plugin registers its platform capability
 * record and its kernels. The plugin never links a registry of its own, so
 * every plugin in a process registers into the host's one registry.
 *
 * Rules for both sides:
 *  - Every struct starts with `struct_size` (sizeof at the writer's version).
 *    Minor versions only append fields; a reader ignores fields past the
 *    writer's struct_size and treats missing trailing fields as absent.
 *  - Status codes use absl::StatusCode's numbering. On error the callee writes
 *    a NUL-terminated message of at most `error_size` bytes into `error`.
 *  - Strings and function pointers handed to the host must stay valid while
 *    the plugin is loaded; the host never unloads a plugin that registered.
 *  - A kernel is an opaque function pointer; its signature is fixed by its op
 *    name and op ABI version (attention/ops.h), so host and plugin must agree
 *    on both, and a host refuses a version it does not know.
 */
#ifndef DSA_PLATFORM_PLUGIN_API_H_
#define DSA_PLATFORM_PLUGIN_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DSA_PLUGIN_API_MAJOR 1
#define DSA_PLUGIN_API_MINOR 5
#define DSA_PLUGIN_GET_API_SYMBOL "DsaGetPluginApi"

#if defined(__GNUC__)
#define DSA_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define DSA_PLUGIN_EXPORT
#endif

/* Same numbering as absl::StatusCode (and gRPC). Kernels report running out
 * of device or host memory as RESOURCE_EXHAUSTED, never as UNAVAILABLE
 * (which means the runtime itself is missing). */
typedef enum DsaStatusCode {
  DSA_STATUS_OK = 0,
  DSA_STATUS_CANCELLED = 1,
  DSA_STATUS_UNKNOWN = 2,
  DSA_STATUS_INVALID_ARGUMENT = 3,
  DSA_STATUS_DEADLINE_EXCEEDED = 4,
  DSA_STATUS_NOT_FOUND = 5,
  DSA_STATUS_ALREADY_EXISTS = 6,
  DSA_STATUS_PERMISSION_DENIED = 7,
  DSA_STATUS_RESOURCE_EXHAUSTED = 8,
  DSA_STATUS_FAILED_PRECONDITION = 9,
  DSA_STATUS_ABORTED = 10,
  DSA_STATUS_OUT_OF_RANGE = 11,
  DSA_STATUS_UNIMPLEMENTED = 12,
  DSA_STATUS_INTERNAL = 13,
  DSA_STATUS_UNAVAILABLE = 14,
  DSA_STATUS_DATA_LOSS = 15,
  DSA_STATUS_UNAUTHENTICATED = 16,
  /* Not a code: makes every int32_t value a valid DsaStatusCode in C++, so a
   * plugin returning an unknown code is an error the host reports (as
   * Internal), not undefined behaviour. */
  DSA_STATUS_CODE_FORCE_INT32 = 0x7fffffff,
} DsaStatusCode;

typedef enum DsaPlatformKind {
  DSA_PLATFORM_KIND_CPU = 0,
  DSA_PLATFORM_KIND_ROCM = 1,
  DSA_PLATFORM_KIND_CUDA = 2,
} DsaPlatformKind;

typedef enum DsaFp8Format {
  DSA_FP8_E4M3FN = 1,   /* OCP FP8 E4M3, max 448 (gfx950, NVIDIA, CPU) */
  DSA_FP8_E4M3FNUZ = 2, /* E4M3 "fnuz", max 240, no negative zero (gfx942) */
} DsaFp8Format;

#define DSA_ARCH_NAME_SIZE 32
#define DSA_DEVICE_NAME_SIZE 128

/* What a platform offers on one device architecture. No device needed. */
typedef struct DsaCapabilities {
  size_t struct_size;
  char arch[DSA_ARCH_NAME_SIZE]; /* "gfx942", "sm_90", "x86_64" */
  int32_t is_cuda_alike;         /* CUDA or ROCm */
  int32_t kv_cache_fp8_format;   /* DsaFp8Format */
  int32_t warp_size;             /* 64 AMD CDNA, 32 NVIDIA, 1 CPU */
  /* The sparse MLA backend runs short prefills on dense causal MHA. */
  int32_t sparse_mla_dense_mha_prefill;
  /* The sparse MLA backend accepts decode context parallelism (DCP > 1). */
  int32_t sparse_mla_decode_context_parallel;
} DsaCapabilities;

/* What the runtime reports about the machine's devices of one platform. */
typedef struct DsaDeviceInfo {
  size_t struct_size;
  int32_t device_count; /* 0: the runtime is there (or not) but no device */
  char arch[DSA_ARCH_NAME_SIZE];   /* of device 0 */
  char name[DSA_DEVICE_NAME_SIZE]; /* of device 0 */
  uint64_t total_memory_bytes;     /* of device 0 */
  int32_t runtime_version;         /* driver/runtime version, or 0 */
} DsaDeviceInfo;

/* The elements of an all-reduce (plugin API 1.3). */
typedef enum DsaCollectiveElement {
  DSA_COLLECTIVE_FLOAT32 = 1,
  DSA_COLLECTIVE_BFLOAT16 = 2,
} DsaCollectiveElement;

typedef enum DsaMemcpyKind {
  DSA_MEMCPY_HOST_TO_DEVICE = 1,
  DSA_MEMCPY_DEVICE_TO_HOST = 2,
  DSA_MEMCPY_DEVICE_TO_DEVICE = 3,
} DsaMemcpyKind;

/* A platform: identity, static capabilities per architecture, the device
 * probe and the device runtime (memory and synchronisation on device 0). */
typedef struct DsaPlatformDescriptor {
  size_t struct_size;
  const char* platform_id;  /* "cpu", "rocm", "cuda" */
  int32_t kind;             /* DsaPlatformKind */
  int32_t is_accelerator;   /* 0 only for the CPU platform */
  const char* default_arch; /* used when no device tells otherwise */
  const char* const* known_archs;
  size_t num_known_archs;

  /* Static capabilities of `arch` (one of known_archs). */
  DsaStatusCode (*capabilities_for_arch)(const char* arch, DsaCapabilities* out,
                                         char* error, size_t error_size);
  /* Loads the runtime lazily and reports devices. No device is not an error:
   * OK with device_count = 0. May be NULL (never a device). */
  DsaStatusCode (*probe_devices)(DsaDeviceInfo* out, char* error,
                                 size_t error_size);

  /* Device runtime on device 0; each may be NULL when unsupported. */
  DsaStatusCode (*device_malloc)(size_t bytes, void** out, char* error,
                                 size_t error_size);
  DsaStatusCode (*device_free)(void* ptr, char* error, size_t error_size);
  DsaStatusCode (*device_memcpy)(void* dst, const void* src, size_t bytes,
                                 int32_t kind /* DsaMemcpyKind */, char* error,
                                 size_t error_size);
  DsaStatusCode (*device_synchronize)(char* error, size_t error_size);

  /* Minor version 1. Free and total bytes of device 0's memory now (for the
   * CPU platform: available and physical host memory), so that a host can
   * refuse work that does not fit before it starts. May be NULL. */
  DsaStatusCode (*device_memory_info)(uint64_t* free_bytes,
                                      uint64_t* total_bytes, char* error,
                                      size_t error_size);

  /* Minor version 2. Streams on device 0, so that a host orders its copies
   * and kernels on a stream of its own rather than on the legacy default
   * stream (with which it then never synchronises implicitly). A stream is
   * the handle kernels take in DsaExecutionContext::stream (attention/
   * kernel_api.h): a cudaStream_t / hipStream_t created non-blocking; on the
   * CPU platform an opaque token, every call on it synchronous. All four are
   * set, or all four NULL (a host then copies synchronously and waits with
   * device_synchronize).
   *  - stream_create: a new stream, never NULL on success.
   *  - stream_destroy: returns at once; work queued on it still completes.
   *  - memcpy_async: `bytes` ordered after the work queued on `stream`. A
   *    host buffer may be reused once the call returns (pageable memory is
   *    staged before it returns); device-to-host into pageable memory is
   *    complete when it returns.
   *  - stream_synchronize: waits until everything queued on `stream` is
   *    done; an error of that work (a kernel's fault) is its status. */
  DsaStatusCode (*stream_create)(void** stream, char* error, size_t error_size);
  DsaStatusCode (*stream_destroy)(void* stream, char* error, size_t error_size);
  DsaStatusCode (*memcpy_async)(void* dst, const void* src, size_t bytes,
                                int32_t kind /* DsaMemcpyKind */, void* stream,
                                char* error, size_t error_size);
  DsaStatusCode (*stream_synchronize)(void* stream, char* error,
                                      size_t error_size);

  /* Minor version 3. Several devices of one process, and collectives among
   * tensor-parallel ranks that are its threads, a device each.
   *  - device_bind: every later call of this descriptor from the calling
   *    thread, and the kernels that thread launches, go to device `ordinal`
   *    (0..device_count-1); a thread never bound uses device 0. May be NULL
   *    (device 0 only).
   *  - collective_create: a group of `num_ranks` ranks, rank r on device
   *    ordinals[r] (NCCL's ncclCommInitAll on CUDA, RCCL's on ROCm; on the
   *    CPU platform the ranks are threads over host memory). Called once,
   *    from any thread, before the ranks' threads use it.
   *  - collective_abort: wakes the ranks waiting in a collective for a peer
   *    (a rank whose step failed never arrives); every later collective of
   *    the group fails. Callable from any thread at any time.
   *  - collective_destroy: frees the group once no rank uses it (after an
   *    abort too).
   *  - all_reduce_sum: rank `rank`'s `count` elements of `element`
   *    (DsaCollectiveElement) at `buffer` become, in place, the sum over the
   *    ranks, ordered on `stream` (the rank's, of stream_create).
   *  - all_gather: `recv` becomes the ranks' `bytes`-sized `send` blocks in
   *    rank order; `send` may be the rank's own block of `recv`.
   * The five collective entries are all set or all NULL. */
  DsaStatusCode (*device_bind)(int32_t ordinal, char* error, size_t error_size);
  DsaStatusCode (*collective_create)(int32_t num_ranks, const int32_t* ordinals,
                                     void** group, char* error,
                                     size_t error_size);
  DsaStatusCode (*collective_abort)(void* group, char* error,
                                    size_t error_size);
  DsaStatusCode (*collective_destroy)(void* group, char* error,
                                      size_t error_size);
  DsaStatusCode (*all_reduce_sum)(void* group, int32_t rank, void* buffer,
                                  size_t count,
                                  int32_t element /* DsaCollectiveElement */,
                                  void* stream, char* error, size_t error_size);
  DsaStatusCode (*all_gather)(void* group, int32_t rank, const void* send,
                              void* recv, size_t bytes, void* stream,
                              char* error, size_t error_size);

  /* Minor version 4. Graphs: the work a thread queues on a stream recorded
   * once and launched again as one unit (CUDA graphs, HIP graphs), so that a
   * host issues a run of kernels whose arguments do not change for the cost
   * of one launch.
   *  - graph_capture_begin: the work the calling thread queues on `stream`
   *    (a stream of stream_create) from now on is recorded, not run, until
   *    graph_capture_end. Calls that would wait for the stream fail while it
   *    records.
   *  - graph_capture_end: ends the recording and returns in *graph an
   *    executable graph of it (never NULL on success). On an error (the
   *    recording failed, a call during it was not allowed, instantiation
   *    failed) the recording is ended and discarded, *graph NULL.
   *  - graph_launch: runs the graph's work, in stream order on `stream`.
   *  - graph_destroy: frees the graph; launches already queued still run.
   * The four are all set or all NULL; a platform with them may still answer
   * DSA_STATUS_UNIMPLEMENTED at run time (a driver without graphs). */
  DsaStatusCode (*graph_capture_begin)(void* stream, char* error,
                                       size_t error_size);
  DsaStatusCode (*graph_capture_end)(void* stream, void** graph, char* error,
                                     size_t error_size);
  DsaStatusCode (*graph_launch)(void* graph, void* stream, char* error,
                                size_t error_size);
  DsaStatusCode (*graph_destroy)(void* graph, char* error, size_t error_size);

  /* Minor version 5. Page-locked host memory: a host that copies from or
   * into the same host buffer on every step (its step inputs, say) registers
   * it once, so that memcpy_async moves it at the link's rate instead of
   * staging it through the driver's pageable buffers.
   *  - host_register: page-locks the `bytes` (> 0) at `ptr` for every device
   *    of the process, until host_unregister. A copy of memcpy_async from or
   *    into registered memory is asynchronous: the buffer must stay as it is
   *    (and allocated) until the stream has done the copy
   *    (stream_synchronize); a range that overlaps a registered one is an
   *    error.
   *  - host_unregister: undoes the host_register of exactly `ptr`; the
   *    buffer's copies must be done.
   * Both set or both NULL (a host then copies from pageable memory). */
  DsaStatusCode (*host_register)(void* ptr, size_t bytes, char* error,
                                 size_t error_size);
  DsaStatusCode (*host_unregister)(void* ptr, char* error, size_t error_size);
} DsaPlatformDescriptor;

/* One kernel of one op for one platform. */
typedef struct DsaKernelDescriptor {
  size_t struct_size;
  const char* op_name;     /* e.g. "indexer_logits" */
  uint32_t op_abi_version; /* signature version of the op */
  const char* platform_id; /* platform the kernel runs on */
  const void* fn;          /* the op's entry point */
} DsaKernelDescriptor;

/* Host functions handed to a plugin's initialize. Registrations made during
 * one initialize take effect together, when it returns OK; nothing takes
 * effect when it fails. */
typedef struct DsaHostApi {
  size_t struct_size;
  uint32_t major_version;
  uint32_t minor_version;
  void* context;
  DsaStatusCode (*register_platform)(void* context,
                                     const DsaPlatformDescriptor* platform,
                                     char* error, size_t error_size);
  DsaStatusCode (*register_kernel)(void* context,
                                   const DsaKernelDescriptor* kernel,
                                   char* error, size_t error_size);
} DsaHostApi;

typedef struct DsaPluginApi {
  size_t struct_size;
  uint32_t major_version; /* DSA_PLUGIN_API_MAJOR the plugin was built with */
  uint32_t minor_version;
  const char* plugin_name;
  DsaStatusCode (*initialize)(const DsaHostApi* host, char* error,
                              size_t error_size);
} DsaPluginApi;

typedef const DsaPluginApi* (*DsaGetPluginApiFn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DSA_PLATFORM_PLUGIN_API_H_ */
