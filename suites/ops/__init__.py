"""The OpInfo ops suite: PyTorch's own op database run on the device under test."""
