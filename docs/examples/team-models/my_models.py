"""Models a team defines in Python for `torchconform sweep --models`.

Each function returns (module, inputs): an nn.Module on CPU and the keyword
arguments of its forward.  The sweep seeds torch before calling it, builds the
model once, runs it on CPU as the reference and on the device under test.
"""
import torch


class GatedMLP(torch.nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.gate = torch.nn.Linear(width, 4 * width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(self.norm(x))) * self.up(x))


def model():
    return GatedMLP(), {"x": torch.randn(2, 16, 64)}


def model_mlp():
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    return net, {"input": torch.randn(4, 32)}


def model_conv():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
    return net, {"input": torch.randn(2, 3, 16, 16)}
