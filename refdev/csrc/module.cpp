// refdev: a reference PrivateUse1 device whose memory lives in host RAM.
//
// What is C++ (and why): the allocator, the device guard, the PrivateUse1 hooks, the
// generator, the storage/view kernels that must be "real" device kernels (views alias
// device storage), and one boxed kernel that computes any operator on CPU by aliasing
// device memory as CPU tensors.  Which operators get that boxed kernel is decided in
// Python from a profile (refdev/profiles/*.yaml) and registered at run time via
// register_ops().
//
//   runtime/  the device: state (count, current device, memory stats), allocator,
//             guard (devices, streams, events), generator, hooks (+ pinned memory)
//   aten/     the operators: device_tensor (CPU aliases, dtype trait), storage_kernels
//             (registered for PrivateUse1 at load), autocast, compute (the boxed CPU
//             kernel), control (profile registrations and traits)
//   boxed_fallback.cpp  boxed mode: PyTorch's cpu_fallback as the backend fallback
//   module.cpp          this file: the Python module, nothing else
#include <torch/extension.h>

#include "aten/compute.h"
#include "aten/control.h"
#include "aten/device_tensor.h"
#include "boxed_fallback.h"
#include "runtime/generator.h"
#include "runtime/state.h"

#include <mutex>
#include <utility>

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
