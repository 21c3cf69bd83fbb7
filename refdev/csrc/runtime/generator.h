// refdev's generators (generator.cpp): device-tagged wrappers around CPU generators.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace refdev {

at::Generator new_generator(c10::DeviceIndex i, uint64_t seed);
// Device i's default generator (i < 0: the current device's).
const at::Generator& default_generator(c10::DeviceIndex i);
// The CPU generator inside a refdev generator, for CPU kernels (they accept no other).
at::Generator cpu_view_of(const at::Generator& g);

}  // namespace refdev
