// Storage, view and copy kernels, registered directly for PrivateUse1 (always
// implemented, whatever the profile), and the conjugate/negative fallthroughs that
// _copy_from needs.
#include "device_tensor.h"

#include "../runtime/allocator.h"
#include "../runtime/state.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace refdev {

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

}  // namespace refdev
