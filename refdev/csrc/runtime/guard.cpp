// Device guard and streams: without the guard nothing moves between devices.
#include "state.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <chrono>

namespace refdev {

// Per-thread current stream of each device (0: the default stream); new streams count up.
thread_local std::array<c10::StreamId, kMaxDevices> t_stream{};
std::atomic<c10::StreamId> g_next_stream{1};

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDev; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != t_current) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kDev, t_current); }
  void setDevice(c10::Device d) const override {
    check_index(d.index());
    t_current = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_current = d.index(); }
  // Streams have identities (the default stream is id 0; torch.Stream() makes a new one)
  // and a per-thread current stream, so stream-aware code (FSDP2, DDP, DTensor) takes its
  // usual paths; execution is synchronous, so work on one stream never overlaps another.
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::UNSAFE, norm(d), t_stream[slot(d)]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, norm(d), 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getNewStream(d, 0); }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::UNSAFE, norm(d), g_next_stream.fetch_add(1));
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    auto old = getStream(s.device());
    t_stream[slot(s.device())] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(g_device_count);
  }
  // Execution is synchronous: an event is complete when recorded, so waiting is a no-op;
  // events keep the host time of their last record, so elapsed_time() measures real time.
  void destroyEvent(void* e, const c10::DeviceIndex) const noexcept override {
    delete static_cast<std::chrono::steady_clock::time_point*>(e);
  }
  void record(void** e, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (*e == nullptr) *e = new std::chrono::steady_clock::time_point();
    *static_cast<std::chrono::steady_clock::time_point*>(*e) = std::chrono::steady_clock::now();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    TORCH_CHECK(a && b, "elapsed_time needs two recorded events");
    auto ta = *static_cast<std::chrono::steady_clock::time_point*>(a);
    auto tb = *static_cast<std::chrono::steady_clock::time_point*>(b);
    return std::chrono::duration<double, std::milli>(tb - ta).count();
  }

 private:
  static size_t slot(c10::Device d) { return d.index() < 0 ? size_t(t_current) : size_t(d.index()); }
  // "refdev" without an index means the current device, as for CUDA.
  static c10::Device norm(c10::Device d) { return d.index() < 0 ? c10::Device(kDev, t_current) : d; }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace refdev
