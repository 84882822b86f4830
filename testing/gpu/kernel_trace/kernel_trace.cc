// A device timeline for a program on an NVIDIA GPU, where Nsight Systems is
// not installed: loaded with LD_PRELOAD, it records every kernel, copy and
// memset the program runs (start and end on the device) and every CUDA
// runtime and driver call it makes (start and end on the host), both on
// CUPTI's one clock, and writes them as CSV when the program exits.
//
//   DSA_KERNEL_TRACE=/tmp/trace.csv LD_PRELOAD=libkernel_trace.so ./bench ...
//   python3 summarize.py /tmp/trace.csv
//
// Lines: kind,start_ns,end_ns,stream_or_thread,correlation,name
//   kind kernel | memcpy | memset   (device time; stream id)
//   kind runtime | driver           (host time; thread id; the call's name)
// Only the process started with DSA_KERNEL_TRACE is traced: the variable is
// taken out of the environment its children inherit.
// The correlation id ties a device record to the host call that issued it.
// A record that cannot be written is counted and reported on stderr at exit;
// records CUPTI dropped (its buffers full) are reported the same way.
#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr size_t kBufferBytes = size_t{16} << 20;

std::FILE* g_out = nullptr;
std::mutex g_out_mutex;
std::atomic<uint64_t> g_records{0};
std::atomic<uint64_t> g_dropped{0};
std::atomic<bool> g_finished{false};
pid_t g_owner = 0;  // the traced process; a forked child writes nothing

void Report(const char* what, CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "kernel_trace: %s: %s\n", what,
               text != nullptr ? text : "unknown CUPTI error");
}

// Kernel names demangled, and written without commas so that the CSV stays
// six fields a line.
void WriteName(std::FILE* f, const char* mangled) {
  if (mangled == nullptr) {
    std::fputs("?", f);
    return;
  }
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  const char* name = status == 0 && plain != nullptr ? plain : mangled;
  for (const char* c = name; *c != '\0'; ++c) {
    std::fputc(*c == ',' ? ';' : *c, f);
  }
  std::free(plain);
}

const char* ApiName(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS) return "?";
  return name != nullptr ? name : "?";
}

void Write(const CUpti_Activity* record) {
  std::FILE* f = g_out;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      std::fprintf(f, "kernel,%llu,%llu,%u,%u,",
                   static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->streamId,
                   k->correlationId);
      WriteName(f, k->name);
      std::fprintf(f, " [%d;%d;%d]x[%d;%d;%d]\n", k->gridX, k->gridY, k->gridZ,
                   k->blockX, k->blockY, k->blockZ);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(f, "memcpy,%llu,%llu,%u,%u,kind %u: %llu bytes\n",
                   static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->streamId,
                   m->correlationId, static_cast<unsigned>(m->copyKind),
                   static_cast<unsigned long long>(m->bytes));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      std::fprintf(f, "memset,%llu,%llu,%u,%u,%llu bytes\n",
                   static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->streamId,
                   m->correlationId, static_cast<unsigned long long>(m->bytes));
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      std::fprintf(f, "%s,%llu,%llu,%u,%u,%s\n", runtime ? "runtime" : "driver",
                   static_cast<unsigned long long>(a->start),
                   static_cast<unsigned long long>(a->end), a->threadId,
                   a->correlationId,
                   ApiName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API
                                   : CUPTI_CB_DOMAIN_DRIVER_API,
                           a->cbid));
      break;
    }
    default:
      return;
  }
  g_records.fetch_add(1, std::memory_order_relaxed);
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size,
                              size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id,
                              uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_out_mutex);
    CUpti_Activity* record = nullptr;
    while (g_out != nullptr && cuptiActivityGetNextRecord(
                                   buffer, valid, &record) == CUPTI_SUCCESS) {
      Write(record);
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) ==
      CUPTI_SUCCESS) {
    g_dropped.fetch_add(dropped, std::memory_order_relaxed);
  }
  std::free(buffer);
}

void Finish() {
  if (g_out == nullptr || getpid() != g_owner || g_finished.exchange(true)) {
    return;
  }
  CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) Report("flushing the records", r);
  std::lock_guard<std::mutex> lock(g_out_mutex);
  std::fclose(g_out);
  g_out = nullptr;
  std::fprintf(stderr, "kernel_trace: %llu records written, %llu dropped\n",
               static_cast<unsigned long long>(g_records.load()),
               static_cast<unsigned long long>(g_dropped.load()));
}

// The context's records are flushed before it goes, in case the program
// destroys it before exit runs Finish.
void CUPTIAPI OnResource(void*, CUpti_CallbackDomain domain,
                         CUpti_CallbackId cbid, const void*) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE &&
      cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

__attribute__((constructor)) void Start() {
  const char* path = std::getenv("DSA_KERNEL_TRACE");
  if (path == nullptr || path[0] == '\0') {
    // A child of a traced program says nothing (see below).
    if (std::getenv("DSA_KERNEL_TRACE_PARENT") != nullptr) return;
    std::fprintf(stderr,
                 "kernel_trace: DSA_KERNEL_TRACE names no output file; not "
                 "tracing\n");
    return;
  }
  // The programs this one starts (a shell of popen, say) inherit
  // LD_PRELOAD but not the output: one opening the same file would truncate
  // it under this process.
  const std::string out_path = path;
  unsetenv("DSA_KERNEL_TRACE");
  setenv("DSA_KERNEL_TRACE_PARENT", "1", 1);
  g_owner = getpid();
  g_out = std::fopen(out_path.c_str(), "w");
  if (g_out == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s: %s; not tracing\n",
                 out_path.c_str(), std::strerror(errno));
    return;
  }
  std::fputs("kind,start_ns,end_ns,stream_or_thread,correlation,name\n", g_out);
  CUptiResult r =
      cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  if (r != CUPTI_SUCCESS) {
    Report("registering the buffers", r);
    std::fclose(g_out);
    g_out = nullptr;
    return;
  }
  CUpti_SubscriberHandle subscriber;
  if (cuptiSubscribe(&subscriber, OnResource, nullptr) == CUPTI_SUCCESS) {
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  }
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
        CUPTI_ACTIVITY_KIND_DRIVER}) {
    r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
      char what[64];
      std::snprintf(what, sizeof(what), "enabling records of kind %d",
                    static_cast<int>(kind));
      Report(what, r);
    }
  }
  std::atexit(Finish);
}

__attribute__((destructor)) void Stop() { Finish(); }

}  // namespace
