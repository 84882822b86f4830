#include "platform/fault_injection.h"

#include <cstdio>

namespace dsa::platform {

namespace fault_internal {
std::atomic<FaultInjector*> g_active_injector{nullptr};
}  // namespace fault_internal

namespace {

struct SiteInfo {
  const char* name;
  DsaStatusCode code;
  int runtime_error;
  const char* text;
};

constexpr SiteInfo kSites[] = {
#define DSA_FAULT_SITE_INFO(e, name, code, runtime_error, text) \
  {name, code, runtime_error, text},
    DSA_FAULT_SITES(DSA_FAULT_SITE_INFO)
#undef DSA_FAULT_SITE_INFO
};
static_assert(sizeof(kSites) / sizeof(kSites[0]) == kNumFaultSites);
static_assert(kNumFaultSites <= 32, "FaultPlan::sites is a 32-bit mask");

}  // namespace

const char* FaultSiteName(FaultSite site) {
  const int i = static_cast<int>(site);
  return i >= 0 && i < kNumFaultSites ? kSites[i].name : "unknown fault site";
}

int FaultSiteRuntimeError(FaultSite site) {
  const int i = static_cast<int>(site);
  return i >= 0 && i < kNumFaultSites ? kSites[i].runtime_error : 999;
}

FaultInjector::FaultInjector(const FaultPlan& plan) : plan_(plan) {
  FaultInjector* none = nullptr;
  active_ = fault_internal::g_active_injector.compare_exchange_strong(
      none, this, std::memory_order_release, std::memory_order_relaxed);
}

FaultInjector::~FaultInjector() {
  if (active_) {
    fault_internal::g_active_injector.store(nullptr, std::memory_order_release);
  }
}

bool FaultInjector::Hit(FaultSite site) {
  if ((plan_.sites & FaultSiteBit(site)) == 0) return false;
  site_calls_[static_cast<int>(site)].fetch_add(1, std::memory_order_relaxed);
  const int64_t n = calls_.fetch_add(1, std::memory_order_relaxed) + 1;
  const bool fail =
      plan_.fail_at > 0 &&
      (plan_.persistent ? n >= plan_.fail_at : n == plan_.fail_at);
  if (fail && faults_.fetch_add(1, std::memory_order_relaxed) == 0) {
    first_site_.store(static_cast<int>(site), std::memory_order_relaxed);
  }
  return fail;
}

DsaStatusCode InjectedFaultError(FaultSite site, char* error,
                                 size_t error_size) {
  const int i = static_cast<int>(site);
  const SiteInfo& info = kSites[i >= 0 && i < kNumFaultSites ? i : 0];
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "%s: %s (injected fault)", info.name,
                  info.text);
  }
  return info.code;
}

}  // namespace dsa::platform
