// The operators a test asks of one device type, recorded by a RecordFunction
// observer (collectors/dispatchwatch.py): every dispatcher call, at any depth,
// whose arguments hold a tensor of that device type or name that device (a
// factory's `device=`).  Nothing in the dispatch changes: an observer only looks,
// where a TorchDispatchMode would sit in the dispatch and alter what dynamo and
// the dispatcher do (it broke torch.compile on a backend without memory_stats).
//
// Why every depth: a composite's decomposition, a native kernel's own calls and
// autograd's backward all reach the device's key, and any of them may be served
// by the backend's CPU fallback.  The boxed CPU fallback's own work runs on CPU
// tensors, so it records nothing but its device-side copies (native kernels).
//
// Also kept: the innermost such operator whose call an exception ended (its
// RecordFunction ends while the exception unwinds), which names the operator a
// "DispatchStub: missing kernel" error came from; the latest such error wins.
//
// And the operators that computed through the CPU fallback themselves: PyTorch's
// at::native::cpu_fallback moves its arguments with aten::_to_cpu, so an
// aten::_to_cpu entered inside a device operator's scope (the innermost one on this
// thread) marks that operator, whether the boxed fallback serves it or a kernel the
// backend registered calls the fallback (torch-opencl's add.out does).  The
// dispatcher's table cannot tell such a kernel from a native one.
// libtorch is built with NDEBUG, and RecordFunction's members differ without it (a
// debug-only flag): compiled without it, inputs() would read the wrong object layout.
#ifndef NDEBUG
#define NDEBUG
#endif
#include <torch/extension.h>

#include <ATen/record_function.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

namespace {

struct Recording {
  std::atomic<bool> active{false};
  std::atomic<int> device_type{-1};
  std::mutex mu;
  std::unordered_set<c10::OperatorName> seen;
  std::optional<c10::OperatorName> raised;
  std::unordered_set<c10::OperatorName> via_cpu;  // operators an aten::_to_cpu ran inside
  std::optional<at::CallbackHandle> handle;
};

// Never freed: a callback still running on another thread (autograd's device
// threads) when a recording ends reads valid memory and finds it inactive.
Recording g_rec;
thread_local bool t_unwinding = false;  // an exception already named its innermost operator

struct DeviceCall : at::ObserverContext {
  DeviceCall(c10::OperatorName n, DeviceCall* p) : name(std::move(n)), parent(p) {}
  c10::OperatorName name;
  DeviceCall* parent;  // the enclosing device call on this thread (RecordFunctions nest)
};
// The innermost device call running on this thread; a call's context lives until its
// RecordFunction ends, which is when it stops being the innermost.
thread_local DeviceCall* t_current = nullptr;

bool on_device(const c10::IValue& v, c10::DeviceType type, int depth = 0) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return t.defined() && t.device().type() == type;
  }
  if (v.isDevice()) return v.toDevice().type() == type;
  if (depth > 2) return false;
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) {
      if (t.defined() && t.device().type() == type) return true;
    }
    return false;
  }
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (on_device(e, type, depth + 1)) return true;
    }
    return false;
  }
  if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) {
      if (on_device(e, type, depth + 1)) return true;
    }
  }
  return false;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!g_rec.active.load(std::memory_order_relaxed)) return nullptr;
  auto type = static_cast<c10::DeviceType>(g_rec.device_type.load(std::memory_order_relaxed));
  bool hit = false;
  for (const c10::IValue& v : fn.inputs()) {
    if (on_device(v, type)) {
      hit = true;
      break;
    }
  }
  t_unwinding = false;
  if (!hit) return nullptr;
  // Asked only of device calls: operator_name() copies two strings, which on every CPU
  // call of a test (its reference computation) cost more than the input walk.
  auto name = fn.operator_name();  // none for scopes that are not operator calls
  if (!name) return nullptr;
  bool to_cpu = t_current != nullptr && name->name == "aten::_to_cpu";
  {
    std::lock_guard<std::mutex> lock(g_rec.mu);
    g_rec.seen.insert(*name);
    if (to_cpu) g_rec.via_cpu.insert(t_current->name);
  }
  auto call = std::make_unique<DeviceCall>(std::move(*name), t_current);
  t_current = call.get();
  return call;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx == nullptr) return;
  auto* call = static_cast<DeviceCall*>(ctx);
  // out of order (never seen): forget the chain rather than keep a pointer that may dangle
  t_current = t_current == call ? call->parent : nullptr;
  if (t_unwinding || std::uncaught_exceptions() == 0) return;
  t_unwinding = true;
  std::lock_guard<std::mutex> lock(g_rec.mu);
  g_rec.raised = call->name;
}

std::string render(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void start(const std::string& device) {
  TORCH_CHECK(!g_rec.active.load(), "a device operator recording is already running");
  {
    std::lock_guard<std::mutex> lock(g_rec.mu);
    g_rec.seen.clear();
    g_rec.raised.reset();
    g_rec.via_cpu.clear();
  }
  g_rec.device_type.store(static_cast<int>(c10::Device(device).type()));
  if (!g_rec.handle) {
    // Registered once and kept: adding and removing a global callback per test
    // would cost more than the test's own calls on small tests.
    g_rec.handle = at::addGlobalCallback(
        at::RecordFunctionCallback(on_start, on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  } else {
    at::reenableCallback(*g_rec.handle);
  }
  g_rec.active.store(true);
}

// The recorded operators ("ns::name" or "ns::name.overload"), the innermost one an
// exception ended ("" if none) and those an aten::_to_cpu ran inside; ends the recording.
std::tuple<std::vector<std::string>, std::string, std::vector<std::string>> stop() {
  TORCH_CHECK(g_rec.active.load(), "no device operator recording is running");
  g_rec.active.store(false);
  at::disableCallback(*g_rec.handle);  // no input boxing between recordings
  std::lock_guard<std::mutex> lock(g_rec.mu);
  std::vector<std::string> out;
  out.reserve(g_rec.seen.size());
  for (const auto& name : g_rec.seen) out.push_back(render(name));
  std::string raised = g_rec.raised ? render(*g_rec.raised) : std::string();
  std::vector<std::string> via_cpu;
  for (const auto& name : g_rec.via_cpu) via_cpu.push_back(render(name));
  g_rec.seen.clear();
  g_rec.raised.reset();
  g_rec.via_cpu.clear();
  return {out, raised, via_cpu};
}

// A host-only phase of a test (its CPU reference, its comparison: suites/common.py): the
// callback is switched off so that the dispatcher boxes no arguments for the phase's CPU
// calls, which cost about as much to observe as device calls and are most of a small
// test's calls.  A recording that is not running is left alone.
void pause_recording() {
  if (g_rec.active.load() && g_rec.handle) at::disableCallback(*g_rec.handle);
}

void resume_recording() {
  if (g_rec.active.load() && g_rec.handle) at::reenableCallback(*g_rec.handle);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "torchconform: the operators a test asks of one device type";
  m.def("start", &start, "begin recording calls with tensors of this device type ('cuda', a PrivateUse1 name...)");
  m.def("stop", &stop,
        "end the recording: (operators seen, the innermost one an exception ended, "
        "those an aten::_to_cpu ran inside)");
  m.def("pause", &pause_recording, "stop observing until resume (a host-only phase of the running recording)");
  m.def("resume", &resume_recording, "observe again after pause");
}
