// refdev's boxed mode: refdev behaves like a typical real PrivateUse1 backend that
// uses PyTorch's standard boxed CPU fallback.
//
// Only the profile's implemented operators get refdev kernels (aten/control.cpp); every other
// operator dispatched to the PrivateUse1 key reaches this backend fallback, which is
// PyTorch's own at::native::cpu_fallback (ATen/native/CPUFallback.h), not refdev's
// aliasing kernel: arguments are copied to CPU with _to_cpu, the operator is redispatched
// to the CPU key, results are copied back with .to(device) / _copy_from_and_resize.
// An operator without a CPU kernel then fails inside it with PyTorch's own "Could not run
// 'aten::X' with arguments from the 'CPU' backend": the truth such a backend shows.
// Nothing warns and nothing counts where a test could see it; the served table is the
// hidden ground truth the dispatcher-level detector is tested against.
#include "boxed_fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <unordered_set>

namespace refdev::boxed {
namespace {

std::mutex g_mu;
std::unordered_map<std::string, int64_t> g_served;
torch::Library* g_lib = nullptr;

std::string label(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_served[label(op.operator_name())];
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace

void install() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_lib) return;
  // What TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(...); } registers, done at
  // load time because only a boxed profile wants it.
  g_lib = new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  g_lib->fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

std::unordered_map<std::string, int64_t> served(bool reset) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto out = g_served;
  if (reset) g_served.clear();
  return out;
}

Truth dispatch_truth(const std::vector<std::string>& planned, bool registered) {
  using K = c10::DispatchKey;
  const std::unordered_set<std::string> kernels(planned.begin(), planned.end());
  auto& dispatcher = c10::Dispatcher::singleton();
  Truth out;
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op) continue;
    auto has = [&](K k) { return op->hasKernelForDispatchKey(k); };
    const auto l = label(name);
    if (kernels.count(l) || (registered && has(K::PrivateUse1))) continue;
    // A composite wins over a backend fallback in the dispatcher's computed table; an
    // AutogradPrivateUse1 kernel of its own is a backend's claim on the operator.
    if (has(K::AutogradPrivateUse1) || has(K::CompositeImplicitAutograd) || has(K::CompositeExplicitAutograd) ||
        has(K::CompositeExplicitAutogradNonFunctional))
      continue;
    (has(K::CPU) ? out.fallback : out.missing).push_back(l);
  }
  std::sort(out.fallback.begin(), out.fallback.end());
  std::sort(out.missing.begin(), out.missing.end());
  return out;
}

}  // namespace refdev::boxed
