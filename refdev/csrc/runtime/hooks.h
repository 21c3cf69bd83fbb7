// refdev's PrivateUse1 hooks (hooks.cpp).
#pragma once

namespace refdev {

// Registers the hooks with PyTorch (once per process; later calls do nothing).
void install_hooks();

}  // namespace refdev
