// The boxed CPU-compute kernel (compute.cpp) and the per-call state that the Python-facing
// control (control.cpp, module.cpp) sets and reads.  Defined once in compute.cpp.
#pragma once

#include "../runtime/state.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <torch/library.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace refdev {

// Guards the counters below and the leaked workspaces.
extern std::mutex g_count_mu;
extern std::unordered_map<std::string, int64_t> g_fallback_counts;
extern std::unordered_map<std::string, int64_t> g_copy_counts;
extern std::unordered_map<std::string, int64_t> g_call_counts;  // only when tracing
// Operators that warn and count as falling back to the CPU.
extern std::unordered_set<c10::OperatorName> g_fallback_ops;
extern bool g_trace;
extern bool g_f64_as_f32;
extern bool g_copies_noncontiguous;

// leaks_ops trait: each call of these operators keeps kLeakBytes of device memory
// that nothing releases.
constexpr size_t kLeakBytes = 4096;
extern std::unordered_set<c10::OperatorName> g_leak_ops;
extern std::vector<c10::DataPtr> g_leaks[kMaxDevices];
extern std::unordered_map<std::string, int64_t> g_leak_counts;

// slow_ops profile option: a delay (microseconds) added to each call of these operators.
extern std::unordered_map<c10::OperatorName, int64_t> g_slow_ops;

// The boxed kernel to register for operator `name` (overload name included, no "aten::").
torch::CppFunction kernel_for(const std::string& name);

}  // namespace refdev
