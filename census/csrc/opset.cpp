// The set of ATen operators a CPU run asks a backend for, recorded by a
// RecordFunction observer (census/modeltrace.py; the Python TorchDispatchMode
// it replaces cost 1.2-1.5x on small models, this about 1.05x).
//
// Every operator call through the dispatcher starts a RecordFunction, at every
// level: a composite's decomposition and the calls a CPU kernel makes inside
// itself included.  What a device's backend key is asked for is rebuilt here:
//  - an operator that decomposes before a backend sees it (a
//    CompositeImplicitAutograd kernel and no kernel of its own for CPU or a
//    CompositeExplicitAutograd one) is looked through: its inner calls count;
//  - inside an operator that counted, nothing counts: those are the CPU
//    kernel's own calls, which a device's kernel would not make.
// Calls from autograd's backward functions are top-level calls: they count.
#include <torch/extension.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

// One recording at a time, process-wide; never freed, so a callback still running on
// another thread when a recording ends reads valid memory (and finds it inactive).
struct Recording {
  std::atomic<bool> active{false};
  std::mutex mu;
  std::unordered_set<c10::OperatorName> seen;
  std::unordered_map<c10::OperatorName, bool> decomposes;  // decomposes_before_backend, per operator
  std::optional<at::CallbackHandle> handle;                // the global RecordFunction callback
};

Recording g_recording;
thread_local int t_depth = 0;  // counted operator calls open on this thread

struct Counted : at::ObserverContext {};

bool decomposes_before_backend(const c10::OperatorName& name) {
  auto op = c10::Dispatcher::singleton().findOp(name);
  if (!op) return false;
  using K = c10::DispatchKey;
  return op->hasKernelForDispatchKey(K::CompositeImplicitAutograd) &&
         !op->hasKernelForDispatchKey(K::CPU) &&
         !op->hasKernelForDispatchKey(K::CompositeExplicitAutograd) &&
         !op->hasKernelForDispatchKey(K::CompositeExplicitAutogradNonFunctional);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Recording& rec = g_recording;
  if (t_depth > 0 || !rec.active.load(std::memory_order_relaxed)) return nullptr;
  auto name = fn.operator_name();  // none for scopes that are not operator calls
  if (!name) return nullptr;
  {
    std::lock_guard<std::mutex> lock(rec.mu);
    auto it = rec.decomposes.find(*name);
    bool looked_through = it != rec.decomposes.end()
        ? it->second
        : rec.decomposes.emplace(*name, decomposes_before_backend(*name)).first->second;
    if (looked_through) return nullptr;
    rec.seen.insert(std::move(*name));
  }
  ++t_depth;
  return std::make_unique<Counted>();
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx != nullptr) --t_depth;
}

void start() {
  Recording& rec = g_recording;
  TORCH_CHECK(!rec.active.load(), "an operator recording is already running");
  {
    std::lock_guard<std::mutex> lock(rec.mu);
    rec.seen.clear();
  }
  rec.active.store(true);
  rec.handle = at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end).scopes({at::RecordScope::FUNCTION}));
}

// The recorded operators as "ns::name" or "ns::name.overload"; ends the recording.
std::vector<std::string> stop() {
  Recording& rec = g_recording;
  TORCH_CHECK(rec.active.load(), "no operator recording is running");
  at::removeCallback(*rec.handle);
  rec.handle.reset();
  rec.active.store(false);
  std::lock_guard<std::mutex> lock(rec.mu);
  std::vector<std::string> out;
  out.reserve(rec.seen.size());
  for (const auto& name : rec.seen) {
    out.push_back(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
  }
  rec.seen.clear();
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "torchconform census: the operators a run asks a backend for";
  m.def("start", &start, "begin recording operator calls (one recording at a time)");
  m.def("stop", &stop, "end the recording; the operators it saw");
}
