// refdev's device allocator (allocator.cpp): host memory, counted per device.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

namespace refdev {

// The allocator of device `dev` (one instance per index, so that a storage resized later
// stays on its own device).
c10::Allocator* device_allocator(int dev);

// Wraps a CPU storage produced by a CPU kernel as device storage without a
// copy; the CPU storage is kept alive by the DataPtr context.
c10::Storage adopt_storage(const c10::Storage& cpu, int dev);

}  // namespace refdev
