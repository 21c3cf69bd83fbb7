// Generator: a device-tagged wrapper around a CPU generator.  CPU kernels only
// accept CPU generators, so the boxed kernel hands them the inner one.
#include "generator.h"

#include "state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GeneratorImpl.h>

#include <mutex>

namespace refdev {

struct RefGenerator final : c10::GeneratorImpl {
  at::Generator inner;
  RefGenerator(c10::DeviceIndex i, at::Generator cpu)
      : c10::GeneratorImpl(c10::Device(kDev, i), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        inner(std::move(cpu)) {}
  void set_current_seed(uint64_t s) override { inner.set_current_seed(s); }
  void set_offset(uint64_t o) override { inner.set_offset(o); }
  uint64_t get_offset() const override { return inner.get_offset(); }
  uint64_t current_seed() const override { return inner.current_seed(); }
  uint64_t seed() override { return inner.seed(); }
  void set_state(const c10::TensorImpl& s) override { inner.unsafeGetGeneratorImpl()->set_state(s); }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return inner.unsafeGetGeneratorImpl()->get_state();
  }
  RefGenerator* clone_impl() const override { return new RefGenerator(device().index(), inner.clone()); }
};

at::Generator new_generator(c10::DeviceIndex i, uint64_t seed) {
  return at::make_generator<RefGenerator>(i, at::make_generator<at::CPUGeneratorImpl>(seed));
}

const at::Generator& default_generator(c10::DeviceIndex i) {
  static at::Generator gens[kMaxDevices];
  static std::once_flag once;
  std::call_once(once, [] {
    for (int d = 0; d < kMaxDevices; ++d) gens[d] = new_generator(d, c10::detail::getNonDeterministicRandom());
  });
  if (i < 0) i = t_current;
  check_index(i);
  return gens[i];
}

at::Generator cpu_view_of(const at::Generator& g) {
  auto* impl = dynamic_cast<RefGenerator*>(g.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl, "generator on ", g.device(), " was not created by ", c10::get_privateuse1_backend());
  return impl->inner;
}

}  // namespace refdev
