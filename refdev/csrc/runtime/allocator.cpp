// Allocator.  One instance per device index, so that a storage resized later
// (resize_bytes_cpu uses storage->allocator()) stays on its own device.  The
// registered global allocator follows the thread's current device.
#include "allocator.h"

#include "state.h"

#include <c10/core/impl/alloc_cpu.h>

#include <cstring>
#include <mutex>

namespace refdev {

struct Ctx {
  void* ptr;
  int64_t nbytes;
  int dev;
  c10::Storage adopted;  // set when the memory belongs to an adopted CPU storage
};

static void delete_ctx(void* p) {
  auto* ctx = static_cast<Ctx*>(p);
  stats_sub(ctx->dev, ctx->nbytes);
  if (!ctx->adopted) c10::free_cpu(ctx->ptr);
  delete ctx;
}

struct RefAllocator final : c10::Allocator {
  int index;  // -1: follow the current device
  explicit RefAllocator(int i) : index(i) {}
  c10::DataPtr allocate(size_t n) override {
    int dev = index >= 0 ? index : t_current;
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    stats_add(dev, static_cast<int64_t>(n));
    return {p, new Ctx{p, static_cast<int64_t>(n), dev, {}}, &delete_ctx,
            c10::Device(kDev, static_cast<c10::DeviceIndex>(dev))};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    if (n) std::memcpy(dst, src, n);
  }
};

static RefAllocator g_current_alloc(-1);
c10::Allocator* device_allocator(int dev) {
  static RefAllocator* allocs[kMaxDevices] = {};
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < kMaxDevices; ++i) allocs[i] = new RefAllocator(i);
  });
  return allocs[dev];
}
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_current_alloc);

c10::Storage adopt_storage(const c10::Storage& cpu, int dev) {
  void* p = cpu.mutable_data();
  int64_t n = static_cast<int64_t>(cpu.nbytes());
  stats_add(dev, n);
  c10::DataPtr dp(p, new Ctx{p, n, dev, cpu}, &delete_ctx,
                  c10::Device(kDev, static_cast<c10::DeviceIndex>(dev)));
  return c10::Storage(c10::Storage::use_byte_size_t(), n, std::move(dp), device_allocator(dev),
                      /*resizable=*/true);
}

}  // namespace refdev
