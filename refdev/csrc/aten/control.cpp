// Python-facing control: which operators get the boxed compute kernel (registered at
// run time from the profile, so the dispatcher names this file for them), the profile's
// traits, the device count and per-call options, counter snapshots.
#include "control.h"

#include "compute.h"
#include "device_tensor.h"

#include "../runtime/hooks.h"
#include "../runtime/state.h"

#include <torch/library.h>

#include <mutex>
#include <unordered_set>

namespace refdev {

static torch::Library* g_lib = nullptr;
static std::unordered_set<std::string> g_registered;

static c10::OperatorName parse_op(const std::string& n) {
  // "aten::sort.values_stable" -> OperatorName("aten::sort", "values_stable")
  auto full = n.rfind("aten::", 0) == 0 ? n : "aten::" + n;
  auto dot = full.find('.');
  return c10::OperatorName(dot == std::string::npos ? full : full.substr(0, dot),
                           dot == std::string::npos ? "" : full.substr(dot + 1));
}

void register_ops(const std::vector<std::string>& implemented, const std::vector<std::string>& fallback) {
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

void set_traits(const std::string& profile, const std::vector<at::Tensor>& dtypes,
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

void set_slow_ops(const std::vector<std::string>& names, const std::vector<int64_t>& micros) {
  TORCH_CHECK(names.size() == micros.size(), "set_slow_ops: one delay per operator");
  g_slow_ops.clear();
  for (size_t i = 0; i < names.size(); ++i) g_slow_ops[parse_op(names[i])] = micros[i];
}

int64_t leaked_bytes(int i) {
  std::lock_guard<std::mutex> lock(g_count_mu);
  return static_cast<int64_t>(g_leaks[i].size() * kLeakBytes);
}

void init(int count, bool f64_as_f32, bool copies_noncontiguous, bool trace) {
  TORCH_CHECK(count >= 1 && count <= kMaxDevices, "device count must be 1..", kMaxDevices, ", got ", count);
  g_device_count = count;
  g_f64_as_f32 = f64_as_f32;
  g_copies_noncontiguous = copies_noncontiguous;
  g_trace = trace;
  install_hooks();
}

std::unordered_map<std::string, int64_t> snapshot(std::unordered_map<std::string, int64_t>& m, bool reset) {
  std::lock_guard<std::mutex> lock(g_count_mu);
  auto out = m;
  if (reset) m.clear();
  return out;
}

}  // namespace refdev
