// Device bookkeeping: count, current device (per thread, like CUDA), memory stats.
#include "state.h"

#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

namespace refdev {

int g_device_count = 2;
thread_local c10::DeviceIndex t_current = 0;
MemStats g_stats[kMaxDevices];

void stats_add(int dev, int64_t n) {
  auto now = g_stats[dev].allocated.fetch_add(n) + n;
  g_stats[dev].num_allocs.fetch_add(1);
  auto peak = g_stats[dev].peak.load();
  while (now > peak && !g_stats[dev].peak.compare_exchange_weak(peak, now)) {
  }
}
void stats_sub(int dev, int64_t n) { g_stats[dev].allocated.fetch_sub(n); }

void check_index(c10::DeviceIndex i) {
  TORCH_CHECK(i >= 0 && i < g_device_count, "invalid device index ", int(i), " for ",
              c10::get_privateuse1_backend(), ": ", g_device_count, " device(s) available");
}

}  // namespace refdev
