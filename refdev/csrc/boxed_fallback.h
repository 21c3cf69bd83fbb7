// refdev's boxed mode (profiles with `fallback: {mode: boxed}`): see boxed_fallback.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace refdev::boxed {

// Registers the PrivateUse1 backend fallback (once per process).
void install();

// Ground truth for tests only: calls the backend fallback received per operator
// ("aten::nonzero", "aten::sort.values_stable"), including calls that then failed inside
// cpu_fallback; `reset` clears the table after reading it.
std::unordered_map<std::string, int64_t> served(bool reset);

// Every aten overload without a PrivateUse1 kernel, an AutogradPrivateUse1 kernel or a
// composite kernel, split by whether a CPU kernel exists: `fallback` (the boxed fallback
// computes it on CPU) and `missing` (cpu_fallback fails: "Could not run ... from the 'CPU'
// backend").  PrivateUse1 kernels are the `planned` overloads, plus, when `registered`,
// those registered in this process (the active profile's own).
struct Truth {
  std::vector<std::string> fallback;
  std::vector<std::string> missing;
};
Truth dispatch_truth(const std::vector<std::string>& planned, bool registered);

}  // namespace refdev::boxed
