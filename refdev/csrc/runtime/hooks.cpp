// PrivateUse1 hooks (backward, generators and storage resize go through these) and
// the pinned host memory they hand out.
#include "hooks.h"

#include "generator.h"
#include "state.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstring>
#include <map>
#include <mutex>

namespace refdev {

// ---------------------------------------------------------------------------
// Pinned host memory.  t.to("cpu", non_blocking=True) and pin_memory() ask the
// accelerator's hooks for a pinned-memory allocator (CUDA page-locks host pages so that
// a copy may run asynchronously).  refdev memory is host memory and every copy is
// synchronous, so pinned memory is ordinary host memory that this allocator remembers:
// is_pinned() is true exactly for it.
static std::mutex g_pinned_mu;
static std::map<const char*, size_t> g_pinned;  // block start -> bytes

static void free_pinned(void* p) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    g_pinned.erase(static_cast<const char*>(p));
  }
  c10::free_cpu(p);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    if (p) {
      std::lock_guard<std::mutex> lock(g_pinned_mu);
      g_pinned[static_cast<const char*>(p)] = n;
    }
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    if (n) std::memcpy(dst, src, n);
  }
};

// Whether `data` lies inside a block of the pinned allocator (a view's pointer may not be
// the block's start).
static bool is_pinned_ptr(const void* data) {
  const auto* p = static_cast<const char*>(data);
  std::lock_guard<std::mutex> lock(g_pinned_mu);
  auto it = g_pinned.upper_bound(p);
  if (it == g_pinned.begin()) return false;
  --it;
  return p < it->first + it->second;
}

// ---------------------------------------------------------------------------
// Hooks: backward, generators and storage resize go through these.
struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex i) const override { return default_generator(i); }
  at::Generator getNewGenerator(c10::DeviceIndex i) const override {
    if (i < 0) i = t_current;
    return new_generator(i, c10::default_rng_seed_val);
  }
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kDev, t_current); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(g_device_count); }
  void setCurrentDevice(c10::DeviceIndex d) const override { check_index(d); t_current = d; }
  c10::DeviceIndex getCurrentDevice() const override { return t_current; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = t_current;
    check_index(d);
    t_current = d;
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& s, size_t n) const override {
    at::native::resize_bytes_cpu(s.unsafeGetStorageImpl(), n);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override {
    static PinnedAllocator allocator;
    return &allocator;
  }
};

static Hooks* g_hooks = nullptr;

void install_hooks() {
  if (!g_hooks) {
    g_hooks = new Hooks();
    at::RegisterPrivateUse1HooksInterface(g_hooks);
  }
}

}  // namespace refdev
