// The boxed CPU-compute kernel, registered per operator from the profile (control.cpp):
// computes an operator on CPU by aliasing the device arguments as CPU tensors, syncs
// written arguments back and adopts new results as device memory.  Also the profile
// traits that act per call (fallback warnings and counts, float64_as_float32,
// copies_noncontiguous, leaks_ops, slow_ops).
#include "compute.h"

#include "device_tensor.h"

#include "../runtime/allocator.h"
#include "../runtime/generator.h"
#include "../runtime/state.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace refdev {

static std::string op_label(const c10::OperatorHandle& op) {
  const auto& n = op.operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

std::mutex g_count_mu;
std::unordered_map<std::string, int64_t> g_fallback_counts;
std::unordered_map<std::string, int64_t> g_copy_counts;
std::unordered_map<std::string, int64_t> g_call_counts;
std::unordered_set<c10::OperatorName> g_fallback_ops;
bool g_trace = false;
bool g_f64_as_f32 = false;
bool g_copies_noncontiguous = false;

// leaks_ops trait: a kernel that forgets to free a workspace.  Each call of
// such an operator allocates kLeakBytes on the device and keeps the DataPtr in
// a per-device list that nothing releases (not empty_cache, not a counter
// reset), so memory_allocated() stays up, as with a real leaking kernel.
std::unordered_set<c10::OperatorName> g_leak_ops;
std::vector<c10::DataPtr> g_leaks[kMaxDevices];
std::unordered_map<std::string, int64_t> g_leak_counts;

// slow_ops profile option: a delay added to each call of these operators (microseconds),
// after the computation, so that a perf run sees a deliberately slowed operator (docs/perf.md).
std::unordered_map<c10::OperatorName, int64_t> g_slow_ops;

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

torch::CppFunction kernel_for(const std::string& name) {
  if (name == "convolution_overrideable")
    return torch::CppFunction::makeFromBoxedFunction<&convolution_overrideable_kernel>();
  if (name == "convolution_backward_overrideable")
    return torch::CppFunction::makeFromBoxedFunction<&convolution_backward_overrideable_kernel>();
  return torch::CppFunction::makeFromBoxedFunction<&compute_kernel>();
}

}  // namespace refdev
