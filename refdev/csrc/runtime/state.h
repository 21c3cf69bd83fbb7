// Device bookkeeping shared by refdev's runtime and its operators: the device count,
// the current device (per thread, like CUDA) and per-device memory statistics.
// Declared here, defined once in state.cpp.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>

namespace refdev {

constexpr c10::DeviceType kDev = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 16;

extern int g_device_count;
extern thread_local c10::DeviceIndex t_current;

struct MemStats {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> num_allocs{0};
};
extern MemStats g_stats[kMaxDevices];

void stats_add(int dev, int64_t n);
void stats_sub(int dev, int64_t n);
// Raises PyTorch's usual error for an index outside 0..device_count-1.
void check_index(c10::DeviceIndex i);

}  // namespace refdev
