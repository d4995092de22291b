"""ascend_acts.convert fuses Conv2d -> BatchNorm2d -> LeakyReLU chains, and nothing else."""

import copy

import torch
from torch import nn

import ascend_acts
from ascend_acts.nn import ConvBNLeakyReLU2d


def dcgan_discriminator():
    return nn.Sequential(
        nn.Conv2d(3, 8, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(8, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(32, 1, 4, 1, 0, bias=False), nn.Flatten(),
    ).double()


def train_step(model, x):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def test_dcgan_discriminator_fuses_blocks_and_trains_identically():
    torch.manual_seed(0)
    original = dcgan_discriminator()
    converted = ascend_acts.convert(copy.deepcopy(original))
    kinds = [type(m) for m in converted]
    assert kinds == [nn.Conv2d, ascend_acts.nn.LeakyReLU, ConvBNLeakyReLU2d, ConvBNLeakyReLU2d, nn.Conv2d, nn.Flatten]
    x = torch.randn(4, 3, 32, 32, dtype=torch.float64)
    torch.testing.assert_close(converted(x), original(x))
    torch.testing.assert_close(train_step(converted, x), train_step(original, x))
    for a, b in zip(converted.parameters(), original.parameters()):
        torch.testing.assert_close(a, b)
    converted.eval(), original.eval()
    torch.testing.assert_close(converted(x), original(x))


def test_optimizer_made_before_conversion_keeps_working():
    model = dcgan_discriminator()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    weight = model[2].weight
    ascend_acts.convert(model)
    assert model[2].conv.weight is weight
    model(torch.randn(2, 3, 32, 32, dtype=torch.float64)).sum().backward()
    before = weight.detach().clone()
    optimizer.step()
    assert not torch.equal(weight, before)


class TwoConsumers(nn.Module):
    """The BN output feeds the activation and a skip path: must not be fused. The second chain may."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1, self.act1 = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.LeakyReLU(0.1)
        self.conv2, self.bn2, self.act2 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.LeakyReLU(0.1)

    def forward(self, x):
        y = self.bn1(self.conv1(x))
        z = self.act1(y) + y
        return self.act2(self.bn2(self.conv2(z)))


def test_fx_model_fuses_only_single_user_chains():
    torch.manual_seed(1)
    original = TwoConsumers().double()
    converted = ascend_acts.convert(copy.deepcopy(original))
    fused = [m for m in converted.modules() if isinstance(m, ConvBNLeakyReLU2d)]
    assert len(fused) == 1 and fused[0].conv.in_channels == 4
    assert isinstance(converted.bn1, nn.BatchNorm2d)
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(converted(x), original(x))
    torch.testing.assert_close(train_step(converted, x), train_step(original, x))


def test_state_dict_round_trip_with_sequential():
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.LeakyReLU(0.2))
    fused = ConvBNLeakyReLU2d(3, 4, 3, negative_slope=0.2)
    fused.load_state_dict(seq.state_dict())
    again = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.LeakyReLU(0.2))
    again.load_state_dict(fused.state_dict())
    for key, value in seq.state_dict().items():
        assert torch.equal(again.state_dict()[key], value)
