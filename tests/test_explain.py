"""ascend_acts.explain on GAN-shaped models: every Conv/ConvTranspose -> Norm -> activation run, whether it fused
(as the converted model's own forward decides: the fused ops counted at the dispatcher agree), why not, the bytes
kept for backward measured both ways; and the model, its version counters and the random state left untouched."""

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

import ascend_acts
from op_counter import OpCounter


def dcgan_generator(nz=8, ngf=4):
    """pytorch/examples' DCGAN generator layout (64x64 output), narrow."""
    return nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


def dcgan_discriminator(ndf=4):
    """pytorch/examples' DCGAN discriminator layout (64x64 input), narrow."""
    return nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())


class Encoder(nn.Module):
    """pix2pix/CycleGAN-like: a ResNet-style stem with instance norm (fused), a downsampling BN block with a dropout
    between, and a plain Conv -> BN -> ReLU block in a nested Sequential."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.InstanceNorm2d(8), nn.ReLU(True))
        self.down = nn.Sequential(nn.Conv2d(8, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Dropout(0.5),
                                  nn.ReLU(True),
                                  nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1), nn.Dropout(0.5), nn.BatchNorm2d(8),
                                                nn.LeakyReLU(0.2)),
                                  nn.Conv2d(8, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())

    def forward(self, x):
        return self.down(self.stem(x))


def snapshot(model):
    return ({k: v.clone() for k, v in model.state_dict().items()},
            [t._version for t in (*model.parameters(), *model.buffers())], torch.get_rng_state())


def assert_unchanged(model, before):
    state, versions, rng = before
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert [t._version for t in (*model.parameters(), *model.buffers())] == versions
    assert torch.equal(torch.get_rng_state(), rng)


def fused_ops(model, *inputs):
    converted = ascend_acts.convert(copy.deepcopy(model))
    with OpCounter() as counter:
        converted(*inputs)
    return counter.fused


@pytest.mark.parametrize("training", [True, False])
def test_dcgan_generator_and_discriminator(training):
    torch.manual_seed(0)
    generator, discriminator = dcgan_generator().train(training), dcgan_discriminator().train(training)
    z = torch.randn(2, 8, 1, 1)
    image = torch.randn(2, 3, 64, 64)
    for model, x in ((generator, z), (discriminator, image)):
        before = snapshot(model)
        table = ascend_acts.explain(model, x)
        assert_unchanged(model, before)
        assert sum(run.fused for run in table) == fused_ops(model, x)  # what runs
        text = str(table)
        for run in table:
            assert run.path in text and run.pattern in text
    # a batch of 16: the first transposed conv's output (from 1x1) is larger than its weight, whose copy recomputing
    # keeps
    generator_table = ascend_acts.explain(generator, torch.randn(16, 8, 1, 1))
    assert [r.pattern for r in generator_table] == ["ConvTranspose2d -> BatchNorm2d -> ReLU"] * 4
    assert all(r.fused for r in generator_table)
    if training:  # ReLU: the conv output is kept by torch, recomputed by these cheap convolutions (K < 393)
        assert all(r.saved_bytes_converted < r.saved_bytes_torch for r in generator_table)
        assert all(r.reason == "recomputes the conv output in backward" for r in generator_table)
    else:
        assert all(r.reason == "eval: running statistics folded into the conv" for r in generator_table)
    table = ascend_acts.explain(discriminator, image)
    assert [r.path for r in table] == ["<model>[2:5]", "<model>[5:8]", "<model>[8:11]"]
    assert all(r.fused for r in table)
    if training:  # InPlace-ABN: the output instead of the conv output and the BN output
        assert all(r.saved_bytes_converted < r.saved_bytes_torch for r in table)
        assert table.saved_bytes_converted < table.saved_bytes_torch
        assert all(r.reason == "" for r in table)
    else:
        assert all(r.reason == "eval: running statistics folded into the conv" for r in table)


def test_reasons_a_hook_a_dropout_between_and_a_nested_sequential():
    torch.manual_seed(1)
    model = Encoder()
    hooked = dcgan_discriminator()
    hooked[3].register_forward_hook(lambda *args: None)
    x = torch.randn(4, 3, 16, 16)  # the conv outputs larger than their weights, whose copies recomputing keeps
    before = snapshot(model)
    table = ascend_acts.explain(model, x)
    assert_unchanged(model, before)
    rows = {r.path: r for r in table}
    assert rows["stem[0:3]"].fused and rows["stem[0:3]"].pattern == "Conv2d -> InstanceNorm2d -> ReLU"
    assert rows["down[0:4]"].fused and rows["down[0:4]"].pattern == "Conv2d -> BatchNorm2d -> Dropout -> ReLU"
    assert rows["down[0:4]"].reason == ("a Dropout between the norm and the activation: it runs itself; recomputes the "
                                        "conv output in backward")
    assert not rows["down.4[0:4]"].fused and rows["down.4[0:4]"].reason == "a Dropout between the conv and the norm"
    assert rows["down[5:8]"].fused and rows["down[5:8]"].reason == "recomputes the conv output in backward"
    assert sum(r.fused for r in table) == fused_ops(model, x)
    hooked_table = ascend_acts.explain(hooked, torch.randn(2, 3, 64, 64))
    assert [r.fused for r in hooked_table] == [False, True, True]
    assert hooked_table[0].reason == "a hook on the norm"
    assert hooked_table[0].saved_bytes_converted == hooked_table[0].saved_bytes_torch


def test_norms_with_no_kernel_say_so():
    model = nn.Sequential(nn.Conv1d(3, 4, 3), nn.InstanceNorm1d(4), nn.ReLU())
    (row,) = ascend_acts.explain(model, torch.randn(2, 3, 8))
    assert not row.fused and row.reason == "InstanceNorm1d: no kernel yet"


def test_unconverted_containers_padding_mode_and_a_run_that_did_not_execute():
    class MySequential(nn.Sequential):
        pass

    class Skips(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), nn.BatchNorm2d(4),
                                      nn.LeakyReLU(0.2))
            self.custom = MySequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
            self.unused = nn.Sequential(nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4))

        def forward(self, x):
            return self.custom(self.used(x))

    table = ascend_acts.explain(Skips(), torch.randn(2, 3, 8, 8))
    rows = {r.path: r for r in table}
    assert rows["used[0:3]"].fused and rows["used[0:3]"].reason == ""  # the op pads it
    assert rows["custom[0:3]"].reason == "not converted: the container is a MySequential, not exactly nn.Sequential"
    assert rows["unused[0:2]"].reason == "did not run in this forward"
    assert rows["unused[0:2]"].saved_bytes_torch is None and "not run" in str(table)
    assert [r.fused for r in table] == [True, False, False]


def test_table_is_aligned_and_iterable():
    table = ascend_acts.explain(dcgan_discriminator(), torch.randn(2, 3, 64, 64))
    lines = str(table).splitlines()
    column = lines[0].index("fused")
    assert all(line[column:].startswith(("yes", "no", "-", "3/3")) for line in lines[1:])
    assert len(table) == 3 and list(table)[0] is table[0]
    assert {"path", "pattern", "fused", "reason", "saved_bytes_torch", "saved_bytes_converted"} <= set(
        vars(table[0]))


def test_explain_refuses_a_non_module():
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        ascend_acts.explain(lambda x: x, torch.randn(1))


def test_a_rows_bytes_are_the_kept_activations_it_produced():
    """A row counts the saved tensors its run produced, whoever keeps them, so the rows' savings are the whole
    forward's (the practitioner review saw one that the whole forward did not have): a ReLU run's output is kept by
    the next convolution either way and its conv output, cheap to recompute (K = 27), by torch only; a LeakyReLU run
    keeps its output instead of the conv output."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(True),
                          nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.LeakyReLU(0.2, True),
                          nn.Conv2d(8, 4, 3))
    table = ascend_acts.explain(model, torch.randn(2, 3, 16, 16))
    relu, leaky = list(table)
    assert relu.fused and leaky.fused
    weight_copy = (8 * 3 * 3 * 3 + 8) * 4  # recomputing keeps the conv weight and bias as the forward used them
    assert relu.saved_bytes_torch - relu.saved_bytes_converted == 2 * 8 * 16 * 16 * 4 - weight_copy  # the conv output
    assert leaky.saved_bytes_torch - leaky.saved_bytes_converted == 2 * 8 * 16 * 16 * 4  # the conv output
    assert table.saved_bytes_torch - table.saved_bytes_converted == 2 * 2 * 8 * 16 * 16 * 4 - weight_copy
    assert relu.saved_bytes_torch + leaky.saved_bytes_torch <= table.saved_bytes_torch


def test_a_container_after_the_norm_ends_the_run():
    """pix2pix's U-Net: Conv2d -> BatchNorm2d -> (the inner block, a module with children) -> ReLU: the run is the
    conv and the norm with no activation, not the ReLU after the block (practitioner review)."""
    inner = nn.Sequential(nn.LeakyReLU(0.2), nn.Conv2d(8, 8, 3, padding=1))
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), inner, nn.ReLU())
    (row,) = list(ascend_acts.explain(model, torch.randn(2, 3, 8, 8)))
    assert (row.path, row.pattern, row.fused) == ("<model>[0:2]", "Conv2d -> BatchNorm2d -> none", True)


def test_the_readme_table_is_what_explain_prints():
    """README's example: a PatchGAN critic with instance and group norm and one reflect-padded conv."""
    torch.manual_seed(0)
    critic = nn.Sequential(
        nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2, True),
        nn.Conv2d(64, 128, 4, 2, 1), nn.InstanceNorm2d(128), nn.LeakyReLU(0.2, True),
        nn.Conv2d(128, 256, 4, 2, 1), nn.GroupNorm(32, 256), nn.LeakyReLU(0.2, True),
        nn.Conv2d(256, 512, 4, 1, 1, padding_mode="reflect"), nn.InstanceNorm2d(512), nn.LeakyReLU(0.2, True),
        nn.Conv2d(512, 1, 4, 1, 1))
    table = str(ascend_acts.explain(critic, torch.randn(4, 3, 64, 64)))
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"```\n{table}\n```" in readme, table


def test_an_unfused_run_keeps_what_torchs_does_row_by_row():
    """A run left unfused (spectral_norm's pre-hook on the conv) runs torch's modules: each row's bytes must be torch's.
    The pre-hook computes the weight the conv saves: it counts for the run on both sides."""
    torch.manual_seed(0)
    sn = nn.utils.spectral_norm
    model = nn.Sequential(sn(nn.Conv2d(3, 8, 4, 2, 1)), nn.LeakyReLU(0.2, True),
                          sn(nn.Conv2d(8, 16, 4, 2, 1)), nn.BatchNorm2d(16), nn.LeakyReLU(0.2, True),
                          sn(nn.Conv2d(16, 32, 4, 2, 1)), nn.InstanceNorm2d(32), nn.ReLU(True))
    table = ascend_acts.explain(model, torch.randn(2, 3, 32, 32))
    assert [r.fused for r in table] == [False, False]
    for run in table:
        assert run.saved_bytes_torch == run.saved_bytes_converted > 0, run


def test_one_activation_module_in_every_run_is_explained_as_separate_ones():
    """pix2pixHD's generators put one nn.ReLU(True) object in every run: the Sequential calls it once per position,
    so each run fuses and keeps what the same model with a ReLU per run does (rows and totals alike)."""
    def generator(activations):
        return nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(3, 8, 7), nn.InstanceNorm2d(8), activations[0],
                             nn.Conv2d(8, 16, 3, 2, 1), nn.InstanceNorm2d(16), activations[1],
                             nn.Conv2d(16, 16, 3, 2, 1), nn.InstanceNorm2d(16), nn.ReLU(), activations[2])

    torch.manual_seed(0)
    shared = nn.ReLU(True)
    model = generator([shared] * 3)
    separate = generator([nn.ReLU(True) for _ in range(3)])
    separate.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 24, 24)
    ours, reference = ascend_acts.explain(model, x), ascend_acts.explain(separate, x)
    assert [row.fused for row in ours] == [row.fused for row in reference] == [True, True, True]
    assert [(row.pattern, row.reason, row.saved_bytes_torch, row.saved_bytes_converted) for row in ours] == \
        [(row.pattern, row.reason, row.saved_bytes_torch, row.saved_bytes_converted) for row in reference]
    assert (ours.saved_bytes_torch, ours.saved_bytes_converted) == \
        (reference.saved_bytes_torch, reference.saved_bytes_converted)
