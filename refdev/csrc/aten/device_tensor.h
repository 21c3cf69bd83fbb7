// Device tensors and their CPU aliases (device_tensor.cpp): how refdev's kernels see
// device memory as CPU tensors and wrap CPU results as device tensors.
#pragma once

#include "../runtime/state.h"

#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace refdev {

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

  // One CPU alias per device tensor: an argument passed twice (cat(x, y, out=x)) must be one
  // tensor to the CPU kernel, whose overlap checks start from identity (an empty tensor
  // overlaps only itself); two aliases of x looked like two tensors and the overlap passed.
  std::vector<std::pair<c10::TensorImpl*, at::Tensor>> impl_to_alias;

  at::Tensor alias(const at::Tensor& t) {
    for (auto& e : impl_to_alias)
      if (e.first == t.unsafeGetTensorImpl()) return e.second;
    at::Tensor made = make_alias(t);
    impl_to_alias.emplace_back(t.unsafeGetTensorImpl(), made);
    return made;
  }

  at::Tensor make_alias(const at::Tensor& t) {
    auto st = cpu_storage(t.storage());
    auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(st), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                        t.dtype());
    out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    if (t.is_conj()) out._set_conj(true);
    if (t.is_neg()) out._set_neg(true);
    return out;
  }
};

inline bool is_ours(const at::Tensor& t) { return t.defined() && t.device().type() == kDev; }

// unsupported_dtypes trait: dtypes the device cannot hold (Neuron has no complex
// numbers).  Every way a device tensor comes into being checks it: allocation,
// a computed result adopted as device memory, and view_as_complex.  Set by
// set_traits (control.cpp).
extern std::string g_profile_name;
extern std::mutex g_dtype_mu;
extern std::unordered_map<int, std::string> g_unsupported_dtypes;  // ScalarType -> torch name

void check_dtype(at::ScalarType t);

// A device tensor over `storage` with the metadata of `like_cpu`.
at::Tensor make_device_tensor(c10::Storage storage, const at::Tensor& like_cpu);
// The device twin of an efficient zero tensor (ZeroTensor key, no memory).
at::Tensor make_zero_device_tensor(const at::Tensor& cpu, int dev);

// A CPU tensor over a device tensor's own bytes (no copy), holding the device storage
// alive: the c10d backend hands these to gloo (refdev memory is host memory).
at::Tensor cpu_alias(const at::Tensor& t);

}  // namespace refdev
