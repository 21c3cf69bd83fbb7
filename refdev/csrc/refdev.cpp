// refdev: a reference PrivateUse1 device whose memory lives in host RAM.
//
// What lives here (and why it is C++): the allocator, the device guard, the
// PrivateUse1 hooks, the generator, the storage/view kernels that must be
// "real" device kernels (views alias device storage), and one boxed kernel
// that computes any operator on CPU by aliasing device memory as CPU tensors.
// Which operators get that boxed kernel is decided in Python from a profile
// (refdev/profiles/*.yaml) and registered at run time via register_ops().
#include <torch/extension.h>
#include <torch/library.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include "boxed_fallback.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace refdev {

constexpr c10::DeviceType kDev = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 16;

// ---------------------------------------------------------------------------
// Device bookkeeping: count, current device (per thread, like CUDA), memory stats.
static int g_device_count = 2;
thread_local c10::DeviceIndex t_current = 0;
// Per-thread current stream of each device (0: the default stream); new streams count up.
thread_local std::array<c10::StreamId, kMaxDevices> t_stream{};
std::atomic<c10::StreamId> g_next_stream{1};

struct MemStats {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> num_allocs{0};
};
static MemStats g_stats[kMaxDevices];

static void stats_add(int dev, int64_t n) {
  auto now = g_stats[dev].allocated.fetch_add(n) + n;
  g_stats[dev].num_allocs.fetch_add(1);
  auto peak = g_stats[dev].peak.load();
  while (now > peak && !g_stats[dev].peak.compare_exchange_weak(peak, now)) {
  }
}
static void stats_sub(int dev, int64_t n) { g_stats[dev].allocated.fetch_sub(n); }

static void check_index(c10::DeviceIndex i) {
  TORCH_CHECK(i >= 0 && i < g_device_count, "invalid device index ", int(i), " for ",
              c10::get_privateuse1_backend(), ": ", g_device_count, " device(s) available");
}

// ---------------------------------------------------------------------------
// Allocator.  One instance per device index, so that a storage resized later
// (resize_bytes_cpu uses storage->allocator()) stays on its own device.  The
// registered global allocator follows the thread's current device.
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
static RefAllocator* device_allocator(int dev) {
  static RefAllocator* allocs[kMaxDevices] = {};
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < kMaxDevices; ++i) allocs[i] = new RefAllocator(i);
  });
  return allocs[dev];
}
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_current_alloc);

// Wraps a CPU storage produced by a CPU kernel as device storage without a
// copy; the CPU storage is kept alive by the DataPtr context.
static c10::Storage adopt_storage(const c10::Storage& cpu, int dev) {
  void* p = cpu.mutable_data();
  int64_t n = static_cast<int64_t>(cpu.nbytes());
  stats_add(dev, n);
  c10::DataPtr dp(p, new Ctx{p, n, dev, cpu}, &delete_ctx,
                  c10::Device(kDev, static_cast<c10::DeviceIndex>(dev)));
  return c10::Storage(c10::Storage::use_byte_size_t(), n, std::move(dp), device_allocator(dev),
                      /*resizable=*/true);
}

// ---------------------------------------------------------------------------
// Device guard: without it nothing moves between devices.
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

// ---------------------------------------------------------------------------
// Generator: a device-tagged wrapper around a CPU generator.  CPU kernels only
// accept CPU generators, so the boxed kernel hands them the inner one.
struct RefGenerator final : c10::GeneratorImpl {
  at::Generator inner;
  RefGenerator(c10::DeviceIndex i, at::Generator cpu)
      : c10::GeneratorImpl(c10::Device(kDev, i), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        inner(std::move(cpu)) {}
  void set_current_seed(uint64_t s) override { inner.set_current_seed(s); }
  void set_offset(uint64_t o) override { inner.set_offset(o); }
  uint64_t get_offset() const override { return inner.get_offset(); }
  uint64_t current_seed() const override { return inner.current_seed(); }
  uint64_t seed() override { return inner.seed(); }
  void set_state(const c10::TensorImpl& s) override { inner.unsafeGetGeneratorImpl()->set_state(s); }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return inner.unsafeGetGeneratorImpl()->get_state();
  }
  RefGenerator* clone_impl() const override { return new RefGenerator(device().index(), inner.clone()); }
};

static at::Generator new_generator(c10::DeviceIndex i, uint64_t seed) {
  return at::make_generator<RefGenerator>(i, at::make_generator<at::CPUGeneratorImpl>(seed));
}

static const at::Generator& default_generator(c10::DeviceIndex i) {
  static at::Generator gens[kMaxDevices];
  static std::once_flag once;
  std::call_once(once, [] {
    for (int d = 0; d < kMaxDevices; ++d) gens[d] = new_generator(d, c10::detail::getNonDeterministicRandom());
  });
  if (i < 0) i = t_current;
  check_index(i);
  return gens[i];
}

static at::Generator cpu_view_of(const at::Generator& g) {
  auto* impl = dynamic_cast<RefGenerator*>(g.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl, "generator on ", g.device(), " was not created by ", c10::get_privateuse1_backend());
  return impl->inner;
}

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

// ---------------------------------------------------------------------------
// Aliasing device memory as CPU tensors.  One AliasMap per call, so that two
// views of one device storage alias one CPU storage (overlap checks work).
struct AliasMap {
  std::vector<std::pair<c10::StorageImpl*, c10::Storage>> dev_to_cpu;

  c10::Storage cpu_storage(const c10::Storage& dev) {
    for (auto& e : dev_to_cpu)
      if (e.first == dev.unsafeGetStorageImpl()) return e.second;
    // Non-owning view of the device bytes; resizable with the CPU allocator so
    // that out= kernels may grow it (sync_written() then moves the result back).
    c10::DataPtr dp(dev.mutable_data(), c10::Device(c10::DeviceType::CPU));
    c10::Storage cpu(c10::Storage::use_byte_size_t(), dev.nbytes(), std::move(dp),
                     c10::GetCPUAllocator(), /*resizable=*/true);
    dev_to_cpu.emplace_back(dev.unsafeGetStorageImpl(), cpu);
    return cpu;
  }
  // The device storage a CPU storage aliases, if any.
  c10::StorageImpl* device_of(const c10::StorageImpl* cpu) const {
    for (auto& e : dev_to_cpu)
      if (e.second.unsafeGetStorageImpl() == cpu) return e.first;
    return nullptr;
  }

  at::Tensor alias(const at::Tensor& t) {
    auto st = cpu_storage(t.storage());
    auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(st), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                        t.dtype());
    out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    if (t.is_conj()) out._set_conj(true);
    if (t.is_neg()) out._set_neg(true);
    return out;
  }
};

static inline bool is_ours(const at::Tensor& t) { return t.defined() && t.device().type() == kDev; }

// unsupported_dtypes trait: dtypes the device cannot hold (Neuron has no complex
// numbers).  Every way a device tensor comes into being checks it: allocation,
// a computed result adopted as device memory, and view_as_complex.
static std::string g_profile_name = "full";
static std::mutex g_dtype_mu;
static std::unordered_map<int, std::string> g_unsupported_dtypes;  // ScalarType -> torch name

static void check_dtype(at::ScalarType t) {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(g_dtype_mu);
    auto it = g_unsupported_dtypes.find(static_cast<int>(t));
    if (it == g_unsupported_dtypes.end()) return;
    name = it->second;
  }
  TORCH_CHECK(false, c10::get_privateuse1_backend(), " does not support dtype ", name, " (profile ", g_profile_name,
              ")");
}

static at::Tensor make_device_tensor(c10::Storage storage, const at::Tensor& like_cpu) {
  check_dtype(like_cpu.scalar_type());
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), like_cpu.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(like_cpu.sizes(), like_cpu.strides(),
                                                   like_cpu.storage_offset());
  return out;
}

// Efficient zero tensors (torch._efficientzerotensor; forward-mode AD's zero tangents):
// the CPU kernel returns a tensor with the ZeroTensor key and no memory (a null data
// pointer).  Its device twin keeps both, as CUDA's kernel makes it: reading it goes
// through PyTorch's ZeroTensor fallback, which materializes zeros.  Adopted as plain
// device memory it handed kernels a null pointer (a segfault on the first read).
static at::Tensor make_zero_device_tensor(const at::Tensor& cpu, int dev) {
  check_dtype(cpu.scalar_type());
  c10::Storage st(c10::Storage::use_byte_size_t(), cpu.storage().nbytes(),
                  c10::DataPtr(nullptr, c10::Device(kDev, static_cast<c10::DeviceIndex>(dev))), device_allocator(dev),
                  /*resizable=*/false);
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(st), c10::DispatchKeySet({c10::DispatchKey::PrivateUse1, c10::DispatchKey::ZeroTensor}), cpu.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  return out;
}

// ---------------------------------------------------------------------------
// Storage and view kernels, registered directly for PrivateUse1.
static at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                      std::optional<at::Layout>, std::optional<at::Device> device,
                                      std::optional<bool>, std::optional<at::MemoryFormat> memory_format) {
  int dev = device && device->has_index() ? device->index() : t_current;
  check_index(dev);
  check_dtype(c10::dtype_or_default(dtype));
  return at::detail::empty_generic(size, device_allocator(dev), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

static at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                                std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  int dev = device && device->has_index() ? device->index() : t_current;
  check_index(dev);
  check_dtype(c10::dtype_or_default(dtype));
  return at::detail::empty_strided_generic(size, stride, device_allocator(dev),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

static const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                                 std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, size, memory_format);
}

static at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                               c10::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

static at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {});
}

static at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage st(c10::Storage::use_byte_size_t(), 0, device_allocator(self.device().index()), true);
  return set_storage(self, std::move(st), 0, {0}, {});
}

static at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src) {
  return at::native::set_tensor_(self, src);
}

static at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  TORCH_CHECK(self.device().type() == c10::DeviceType::CPU || is_ours(self), "cannot copy from ", self.device(),
              " to ", dst.device());
  TORCH_CHECK(dst.device().type() == c10::DeviceType::CPU || is_ours(dst), "cannot copy from ", self.device(),
              " to ", dst.device());
  AliasMap amap;
  at::Tensor s = is_ours(self) ? amap.alias(self) : self;
  at::Tensor d = is_ours(dst) ? amap.alias(dst) : dst;
  d.copy_(s);
  return dst;
}

static at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

static at::Tensor view_as_complex(const at::Tensor& self) {
  check_dtype(c10::toComplexType(self.scalar_type()));
  return at::native::view_as_complex(self);
}

static c10::Scalar local_scalar_dense(const at::Tensor& self) {
  AliasMap amap;
  return at::_local_scalar_dense(amap.alias(self));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

// Conjugate/negative views reach _copy_from with their bits set and
// copy_from resolves them; without the fallthrough, clone() of a conj view
// recurses between the conj fallback and copy_.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }
TORCH_LIBRARY_IMPL(aten, Negative, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }

// Autocast: without a kernel for AutocastPrivateUse1 every op fails inside
// torch.autocast(<name>).  Matmul-like ops run in the lower precision (as on
// CUDA); everything else falls through unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  using namespace at::autocast;
  KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(bmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(baddbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(matmul, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linear, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv1d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv2d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv3d, lower_precision_fp)
}

// ---------------------------------------------------------------------------
// The boxed CPU-compute kernel, registered per operator from the profile.
static std::string op_label(const c10::OperatorHandle& op) {
  const auto& n = op.operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

static std::mutex g_count_mu;
static std::unordered_map<std::string, int64_t> g_fallback_counts;
static std::unordered_map<std::string, int64_t> g_copy_counts;
static std::unordered_map<std::string, int64_t> g_call_counts;  // only when tracing
static std::unordered_set<c10::OperatorName> g_fallback_ops;
static bool g_trace = false;
static bool g_f64_as_f32 = false;

// leaks_ops trait: a kernel that forgets to free a workspace.  Each call of
// such an operator allocates kLeakBytes on the device and keeps the DataPtr in
// a per-device list that nothing releases (not empty_cache, not a counter
// reset), so memory_allocated() stays up, as with a real leaking kernel.
constexpr size_t kLeakBytes = 4096;
static std::unordered_set<c10::OperatorName> g_leak_ops;
static std::vector<c10::DataPtr> g_leaks[kMaxDevices];
static std::unordered_map<std::string, int64_t> g_leak_counts;

// slow_ops profile option: a delay added to each call of these operators (microseconds),
// after the computation, so that a perf run sees a deliberately slowed operator (docs/perf.md).
static std::unordered_map<c10::OperatorName, int64_t> g_slow_ops;

static void slow_down(const c10::OperatorHandle& op) {
  auto it = g_slow_ops.find(op.operator_name());
  if (it != g_slow_ops.end()) std::this_thread::sleep_for(std::chrono::microseconds(it->second));
}

static void leak_workspace(const c10::OperatorHandle& op, int dev) {
  auto dp = device_allocator(dev)->allocate(kLeakBytes);
  std::lock_guard<std::mutex> lock(g_count_mu);
  g_leaks[dev].push_back(std::move(dp));
  ++g_leak_counts[op_label(op)];
}
static bool g_copies_noncontiguous = false;


static void bump(std::unordered_map<std::string, int64_t>& m, const std::string& k) {
  std::lock_guard<std::mutex> lock(g_count_mu);
  ++m[k];
}

// float64_as_float32: results are rounded through float32, as a device
// without float64 units would produce them.
static void round_f64(const at::Tensor& cpu) {
  if (!cpu.defined()) return;
  if (cpu.scalar_type() == at::kDouble) {
    cpu.copy_(cpu.to(at::kFloat));
  } else if (cpu.scalar_type() == at::kComplexDouble) {
    cpu.copy_(cpu.to(at::kComplexFloat));
  }
}

struct Written {
  at::Tensor dev;
  at::Tensor cpu;
};

// After the CPU kernel ran: give the device tensor the CPU alias's metadata,
// and its bytes if the kernel reallocated (resized) the alias.
static void sync_written(const Written& w) {
  const auto& d = w.dev;
  const auto& c = w.cpu;
  const int dev = d.device().index();
  if (c.storage().data() != d.storage().data() || c.storage().nbytes() != d.storage().nbytes()) {
    c10::Storage fresh(c10::Storage::use_byte_size_t(), c.storage().nbytes(), device_allocator(dev), true);
    if (c.storage().nbytes()) std::memcpy(fresh.mutable_data(), c.storage().data(), c.storage().nbytes());
    d.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(fresh));
  }
  if (c.sizes() != d.sizes() || c.strides() != d.strides() || c.storage_offset() != d.storage_offset()) {
    d.unsafeGetTensorImpl()->set_sizes_and_strides(c.sizes(), c.strides(), c.storage_offset());
  }
}

// Computes `target` on CPU aliases of the device arguments on the stack (laid
// out for `target`'s schema).  `op` is the operator the caller dispatched: it
// names the call in counts and warnings.  Usually target == op.
static void compute_as(const c10::OperatorHandle& op, const c10::OperatorHandle& target, torch::jit::Stack* stack) {
  const auto& schema = target.schema();
  const auto& args = schema.arguments();
  const size_t nargs = args.size();
  const size_t base = stack->size() - nargs;

  if (g_trace) bump(g_call_counts, op_label(op));
  if (g_fallback_ops.count(op.operator_name())) {
    auto label = op_label(op);
    bump(g_fallback_counts, label);
    TORCH_WARN("The operator '", label, "' is not currently supported on the ", c10::get_privateuse1_backend(),
               " backend and will fall back to run on the CPU. This may have performance implications.");
  }

  AliasMap amap;
  std::vector<Written> written;
  int dev = -1;
  std::vector<size_t> none_generators;

  // The stack may hold the only reference to a device input (e.g. a
  // temporary the conjugate fallback materialized); keep each alive while its
  // CPU alias is in use.
  std::vector<at::Tensor> keep;
  // copies_noncontiguous: non-contiguous inputs to copy, as (stack slot, list element or -1);
  // decided once every written argument is known (see below).
  std::vector<std::pair<size_t, int64_t>> to_copy;
  auto to_cpu = [&](const at::Tensor& t, bool write, size_t slot, int64_t elem) -> at::Tensor {
    if (!is_ours(t)) return t;
    keep.push_back(t);
    if (dev < 0) dev = t.device().index();
    at::Tensor c = amap.alias(t);
    if (write) {
      written.push_back({t, c});
    } else if (g_copies_noncontiguous && !c.is_contiguous()) {
      to_copy.emplace_back(slot, elem);
    }
    return c;
  };

  for (size_t i = 0; i < nargs; ++i) {
    auto& iv = (*stack)[base + i];
    const auto* ai = args[i].alias_info();
    bool write = ai && ai->isWrite();
    if (iv.isTensor()) {
      iv = to_cpu(iv.toTensor(), write, base + i, -1);
    } else if (iv.isList()) {
      auto list = iv.toList();
      bool any = false;
      for (size_t k = 0; k < list.size(); ++k) {
        auto e = list.get(k);
        if (e.isTensor() && is_ours(e.toTensor())) { any = true; break; }
      }
      if (any) {
        auto copy = list.copy();
        for (size_t k = 0; k < copy.size(); ++k) {
          auto e = copy.get(k);
          if (e.isTensor()) copy.set(k, to_cpu(e.toTensor(), write, base + i, static_cast<int64_t>(k)));
        }
        iv = std::move(copy);
      }
    } else if (iv.isDevice()) {
      if (iv.toDevice().type() == kDev) {
        if (dev < 0) dev = iv.toDevice().has_index() ? iv.toDevice().index() : t_current;
        iv = c10::Device(c10::DeviceType::CPU);
      }
    } else if (iv.isGenerator()) {
      auto g = iv.toGenerator();
      if (g.device().type() == kDev) iv = cpu_view_of(g);
    } else if (iv.isNone() && args[i].type()->kind() == c10::TypeKind::OptionalType &&
               args[i].type()->containedType(0)->kind() == c10::TypeKind::GeneratorType) {
      none_generators.push_back(i);
    }
  }
  // An input that overlaps a written argument is not copied: the CPU kernel must see the
  // overlap and reject it (or handle it) exactly as on CPU; a private copy hid it, so an
  // overlapping out= that CPU rejects was accepted.
  for (const auto& [slot, elem] : to_copy) {
    auto& iv = (*stack)[slot];
    at::Tensor c = elem < 0 ? iv.toTensor() : iv.toList().get(static_cast<size_t>(elem)).toTensor();
    bool overlaps = false;
    for (const auto& w : written) {
      if (at::get_overlap_status(c, w.cpu) != at::MemOverlapStatus::No) {
        overlaps = true;
        break;
      }
    }
    if (overlaps) continue;
    bump(g_copy_counts, op_label(op));
    if (elem < 0) {
      iv = c.contiguous();
    } else {
      iv.toList().set(static_cast<size_t>(elem), c.contiguous());
    }
  }
  if (dev < 0) dev = t_current;
  // Random ops without an explicit generator draw from this device's default
  // generator, so torch.<device>.manual_seed governs them.
  for (auto i : none_generators) (*stack)[base + i] = cpu_view_of(default_generator(dev));

  {
    c10::DeviceGuard guard(c10::Device(kDev, static_cast<c10::DeviceIndex>(dev)));
    // A full dispatch on the CPU aliases (not a redispatch to the CPU key
    // alone): conjugate/negative bits carried by the aliases must go through
    // their fallbacks before a CPU kernel that does not understand them.
    target.callBoxed(stack);
  }

  for (auto& w : written) {
    if (g_f64_as_f32) round_f64(w.cpu);
    sync_written(w);
  }
  if (!g_leak_ops.empty() && g_leak_ops.count(op.operator_name())) leak_workspace(op, dev);
  if (!g_slow_ops.empty()) slow_down(op);

  // Returns: an out/in-place argument comes back as the caller's device tensor;
  // a view of a device input becomes a device view; anything new is adopted.
  const size_t nret = schema.returns().size();
  const size_t rbase = stack->size() - nret;
  auto to_dev = [&](const at::Tensor& c) -> at::Tensor {
    if (!c.defined() || c.device().type() != c10::DeviceType::CPU) return c;
    for (auto& w : written)
      if (w.cpu.unsafeGetTensorImpl() == c.unsafeGetTensorImpl()) return w.dev;
    if (c._is_zerotensor()) return make_zero_device_tensor(c, dev);
    if (auto* ds = amap.device_of(c.storage().unsafeGetStorageImpl())) {
      return make_device_tensor(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(ds)), c);
    }
    if (g_f64_as_f32) round_f64(c);
    return make_device_tensor(adopt_storage(c.storage(), dev), c);
  };
  for (size_t r = 0; r < nret; ++r) {
    auto& iv = (*stack)[rbase + r];
    if (iv.isTensor()) {
      iv = to_dev(iv.toTensor());
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) out.push_back(to_dev(t));
      iv = std::move(out);
    }
  }
}

static void compute_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  compute_as(op, op, stack);
}

// aten::_convolution picks the "Overrideable" backend for PrivateUse1 tensors
// and calls these two hooks, which have no CPU kernel (their default kernel
// only raises).  They take convolution's / convolution_backward's arguments
// (the backward one without bias_sizes), so they are computed as the CPU
// convolution on the same aliased memory.
static c10::OperatorHandle find_op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

static void convolution_overrideable_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet,
                                            torch::jit::Stack* stack) {
  static const c10::OperatorHandle target = find_op("aten::convolution", "");
  compute_as(op, target, stack);
}

static void convolution_backward_overrideable_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet,
                                                     torch::jit::Stack* stack) {
  static const c10::OperatorHandle target = find_op("aten::convolution_backward", "");
  // (grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask)
  const size_t base = stack->size() - op.schema().arguments().size();
  const bool want_bias = (*stack)[base + 9].toBoolList().get(2);
  // convolution_backward wants bias_sizes (after weight) only to know that a
  // bias gradient is asked for: it is grad_output summed over all but dim 1.
  c10::IValue bias_sizes;
  if (want_bias) bias_sizes = c10::IValue(std::vector<int64_t>{(*stack)[base].toTensor().size(1)});
  stack->insert(stack->begin() + static_cast<std::ptrdiff_t>(base + 3), std::move(bias_sizes));
  compute_as(op, target, stack);
}

static torch::CppFunction kernel_for(const std::string& name) {
  if (name == "convolution_overrideable")
    return torch::CppFunction::makeFromBoxedFunction<&convolution_overrideable_kernel>();
  if (name == "convolution_backward_overrideable")
    return torch::CppFunction::makeFromBoxedFunction<&convolution_backward_overrideable_kernel>();
  return torch::CppFunction::makeFromBoxedFunction<&compute_kernel>();
}

// ---------------------------------------------------------------------------
// Python-facing control.
static torch::Library* g_lib = nullptr;
static std::unordered_set<std::string> g_registered;

static c10::OperatorName parse_op(const std::string& n) {
  // "aten::sort.values_stable" -> OperatorName("aten::sort", "values_stable")
  auto full = n.rfind("aten::", 0) == 0 ? n : "aten::" + n;
  auto dot = full.find('.');
  return c10::OperatorName(dot == std::string::npos ? full : full.substr(0, dot),
                           dot == std::string::npos ? "" : full.substr(dot + 1));
}

static void register_ops(const std::vector<std::string>& implemented, const std::vector<std::string>& fallback) {
  if (!g_lib) {
    g_lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  }
  auto add = [&](const std::string& full) {
    if (g_registered.count(full)) return;
    auto name = full.rfind("aten::", 0) == 0 ? full.substr(6) : full;
    g_lib->impl(name.c_str(), kernel_for(name));
    g_registered.insert(full);
  };
  for (const auto& n : implemented) add(n);
  for (const auto& n : fallback) {
    g_fallback_ops.insert(parse_op(n));
    add(n.rfind("aten::", 0) == 0 ? n : "aten::" + n);
  }
}

// Profile traits that are lists: dtypes as (empty CPU tensor of that dtype,
// torch name) pairs, leaking operators as full overload names.
static void set_traits(const std::string& profile, const std::vector<at::Tensor>& dtypes,
                       const std::vector<std::string>& dtype_names, const std::vector<std::string>& leak_ops) {
  TORCH_CHECK(dtypes.size() == dtype_names.size(), "set_traits: one name per dtype");
  {
    std::lock_guard<std::mutex> lock(g_dtype_mu);
    g_profile_name = profile;
    g_unsupported_dtypes.clear();
    for (size_t i = 0; i < dtypes.size(); ++i)
      g_unsupported_dtypes[static_cast<int>(dtypes[i].scalar_type())] = dtype_names[i];
  }
  g_leak_ops.clear();
  for (const auto& n : leak_ops) g_leak_ops.insert(parse_op(n));
}

static void set_slow_ops(const std::vector<std::string>& names, const std::vector<int64_t>& micros) {
  TORCH_CHECK(names.size() == micros.size(), "set_slow_ops: one delay per operator");
  g_slow_ops.clear();
  for (size_t i = 0; i < names.size(); ++i) g_slow_ops[parse_op(names[i])] = micros[i];
}

static int64_t leaked_bytes(int i) {
  std::lock_guard<std::mutex> lock(g_count_mu);
  return static_cast<int64_t>(g_leaks[i].size() * kLeakBytes);
}

static void init(int count, bool f64_as_f32, bool copies_noncontiguous, bool trace) {
  TORCH_CHECK(count >= 1 && count <= kMaxDevices, "device count must be 1..", kMaxDevices, ", got ", count);
  g_device_count = count;
  g_f64_as_f32 = f64_as_f32;
  g_copies_noncontiguous = copies_noncontiguous;
  g_trace = trace;
  if (!g_hooks) {
    g_hooks = new Hooks();
    at::RegisterPrivateUse1HooksInterface(g_hooks);
  }
}

// A CPU tensor over a device tensor's own bytes (no copy), holding the device storage
// alive: the c10d backend hands these to gloo (refdev memory is host memory).
static at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(is_ours(t), "cpu_alias needs a ", c10::get_privateuse1_backend(), " tensor, got ", t.device());
  auto* keep = new c10::Storage(t.storage());
  c10::DataPtr dp(keep->mutable_data(), keep, [](void* ctx) { delete static_cast<c10::Storage*>(ctx); },
                  c10::Device(c10::DeviceType::CPU));
  c10::Storage cpu(c10::Storage::use_byte_size_t(), keep->nbytes(), std::move(dp), nullptr, /*resizable=*/false);
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(cpu), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                      t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

static std::unordered_map<std::string, int64_t> snapshot(std::unordered_map<std::string, int64_t>& m, bool reset) {
  std::lock_guard<std::mutex> lock(g_count_mu);
  auto out = m;
  if (reset) m.clear();
  return out;
}

}  // namespace refdev

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace refdev;
  m.def("init", &init);
  m.def("register_ops", &register_ops);
  m.def("device_count", [] { return g_device_count; });
  m.def("current_device", [] { return int(t_current); });
  m.def("set_device", [](int i) { check_index(i); t_current = static_cast<c10::DeviceIndex>(i); });
  m.def("memory_allocated", [](int i) { check_index(i); return g_stats[i].allocated.load(); });
  m.def("max_memory_allocated", [](int i) { check_index(i); return g_stats[i].peak.load(); });
  m.def("num_allocs", [](int i) { check_index(i); return g_stats[i].num_allocs.load(); });
  m.def("reset_peak_memory_stats", [](int i) {
    check_index(i);
    g_stats[i].peak.store(g_stats[i].allocated.load());
  });
  m.def("manual_seed", [](int i, uint64_t seed) {
    auto g = default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(seed);
  });
  m.def("seed", [](int i) {
    auto g = default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.seed();
  });
  m.def("initial_seed", [](int i) { return default_generator(static_cast<c10::DeviceIndex>(i)).current_seed(); });
  m.def("get_rng_state", [](int i) {
    auto g = default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.get_state();
  });
  m.def("set_rng_state", [](int i, const at::Tensor& state) {
    auto g = default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  });
  m.def("fallback_counts", [](bool reset) { return snapshot(g_fallback_counts, reset); });
  m.def("copy_counts", [](bool reset) { return snapshot(g_copy_counts, reset); });
  m.def("call_counts", [](bool reset) { return snapshot(g_call_counts, reset); });
  m.def("set_traits", &set_traits);
  m.def("set_slow_ops", &set_slow_ops);
  m.def("leaked_bytes", [](int i) { check_index(i); return leaked_bytes(i); });
  // Never resets: a leak stays visible for the life of the process.
  m.def("leak_counts", [] { return snapshot(g_leak_counts, false); });
  m.def("cpu_alias", &cpu_alias);
  // Boxed mode (fallback.mode: boxed; csrc/boxed_fallback.cpp).
  m.def("install_boxed_fallback", &boxed::install);
  m.def("boxed_fallback_served", &boxed::served);
  m.def("boxed_dispatch_truth", [](const std::vector<std::string>& planned, bool registered) {
    auto truth = boxed::dispatch_truth(planned, registered);
    return std::make_pair(truth.fallback, truth.missing);
  });
}
