// Python-facing control of refdev (control.cpp): device count and per-call options,
// the profile's operator registrations and traits, counter snapshots.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace refdev {

// Sets the device count (1..16) and the per-call options; registers the hooks (once).
void init(int count, bool f64_as_f32, bool copies_noncontiguous, bool trace);
// Registers the boxed compute kernel for the implemented and fallback operators
// ("aten::sort.values_stable" or "sort.values_stable"); the fallback ones warn and count.
void register_ops(const std::vector<std::string>& implemented, const std::vector<std::string>& fallback);
// Profile traits that are lists: dtypes as (empty CPU tensor of that dtype,
// torch name) pairs, leaking operators as full overload names.
void set_traits(const std::string& profile, const std::vector<at::Tensor>& dtypes,
                const std::vector<std::string>& dtype_names, const std::vector<std::string>& leak_ops);
void set_slow_ops(const std::vector<std::string>& names, const std::vector<int64_t>& micros);
// Bytes the leaks_ops trait has kept on device i.
int64_t leaked_bytes(int i);
// A copy of a counter table (one of compute.h's), cleared after reading when `reset`.
std::unordered_map<std::string, int64_t> snapshot(std::unordered_map<std::string, int64_t>& m, bool reset);

}  // namespace refdev
