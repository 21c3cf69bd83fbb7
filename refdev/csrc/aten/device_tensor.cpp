// Device tensors: the dtype check every new device tensor passes, wrapping CPU results
// as device tensors, and the zero-copy CPU alias the c10d backend uses.
#include "device_tensor.h"

#include "../runtime/allocator.h"

#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

namespace refdev {

std::string g_profile_name = "full";
std::mutex g_dtype_mu;
std::unordered_map<int, std::string> g_unsupported_dtypes;

void check_dtype(at::ScalarType t) {
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

at::Tensor make_device_tensor(c10::Storage storage, const at::Tensor& like_cpu) {
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
at::Tensor make_zero_device_tensor(const at::Tensor& cpu, int dev) {
  check_dtype(cpu.scalar_type());
  c10::Storage st(c10::Storage::use_byte_size_t(), cpu.storage().nbytes(),
                  c10::DataPtr(nullptr, c10::Device(kDev, static_cast<c10::DeviceIndex>(dev))), device_allocator(dev),
                  /*resizable=*/false);
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(st), c10::DispatchKeySet({c10::DispatchKey::PrivateUse1, c10::DispatchKey::ZeroTensor}), cpu.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  return out;
}

at::Tensor cpu_alias(const at::Tensor& t) {
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

}  // namespace refdev
