"""FLOPs and bytes per op family against counts done by hand (docs/estimate.md, "Counting"), on signatures
as the simulator writes them (neuron_backend/EVENTS.md, `eager_compile`)."""

from __future__ import annotations

import pytest

from neuron_port.check.estimate.flops import causal_fraction, conv_output, parse_tensor, tensor_list, work


def test_tensor_descriptors():
    assert parse_tensor("bf16[4,32,64]nc").shape == (4, 32, 64)
    assert parse_tensor("f32[]").numel == 1
    assert parse_tensor("f32[3,4]@cpu").on_cpu
    assert parse_tensor("i64[8]").nbytes == 64
    assert parse_tensor("1.0") is None and parse_tensor("[64]") is None


def test_matmul_family():
    # mm [256,128] x [128,64]: 2*256*64*128 FLOPs; bytes: 2 inputs + output, bf16
    w = work("aten::mm", ["bf16[256,128]nc", "bf16[128,64]"])
    assert (w.family, w.dtype) == ("matmul", "bf16")
    assert w.flops == 2 * 256 * 64 * 128
    assert w.bytes == 2 * (256 * 128 + 128 * 64 + 256 * 64)
    # addmm: bias [64] + [128,256] x [256,64]
    w = work("aten::addmm", ["bf16[64]", "bf16[128,256]", "bf16[256,64]nc", "1", "1"])
    assert w.flops == 2 * 128 * 64 * 256
    assert w.bytes == 2 * (64 + 128 * 256 + 256 * 64 + 128 * 64)
    # bmm [8,32,16] x [8,16,32], f32
    w = work("aten::bmm", ["f32[8,32,16]", "f32[8,16,32]"])
    assert (w.flops, w.dtype) == (2 * 8 * 32 * 32 * 16, "fp32")
    assert w.bytes == 4 * (8 * 32 * 16 * 2 + 8 * 32 * 32)
    # baddbmm: self [8,32,32] + batch1 x batch2
    w = work("aten::baddbmm", ["f32[8,32,32]", "f32[8,32,16]", "f32[8,16,32]", "1", "1"])
    assert w.flops == 2 * 8 * 32 * 32 * 16
    # linear: input [4,10,32], weight [48,32], bias [48]: 40 rows
    w = work("aten::linear", ["f16[4,10,32]", "f16[48,32]", "f16[48]"])
    assert (w.flops, w.dtype) == (2 * 40 * 48 * 32, "f16")
    assert w.bytes == 2 * (4 * 10 * 32 + 48 * 32 + 48 + 40 * 48)


def test_convolution_forward_with_stride_padding_dilation_groups():
    # x [2,8,32,32], w [16,4,3,3] (groups 2), stride 2, padding 1, dilation 1 -> out [2,16,16,16]
    assert conv_output([32, 32], [3, 3], [2], [1], [1]) == [16, 16]
    sig = ["f32[2,8,32,32]", "f32[16,4,3,3]", "f32[16]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "2"]
    w = work("aten::convolution", sig)
    out = 2 * 16 * 16 * 16
    assert w.family == "convolution"
    assert w.flops == 2 * out * 4 * 3 * 3  # each output: C_in/groups * kh * kw MACs
    assert w.bytes == 4 * (2 * 8 * 32 * 32 + 16 * 4 * 9 + 16 + out)
    # dilation 2 without padding: (32 - 2*2 - 1) // 1 + 1 = 28
    dilated = ["f32[1,3,32,32]", "f32[6,3,3,3]", "None", "[1, 1]", "[0, 0]", "[2, 2]", "False", "[0, 0]", "1"]
    assert work("aten::convolution", dilated).flops == 2 * (6 * 28 * 28) * 3 * 9


def test_convolution_backward_counts_the_passes_it_ran():
    base = ["f32[2,16,16,16]", "f32[2,8,32,32]", "f32[16,4,3,3]", "[16]", "[2, 2]", "[1, 1]", "[1, 1]", "False",
            "[0, 0]", "2"]
    forward = 2 * (2 * 16 * 16 * 16) * 4 * 9
    assert work("aten::convolution_backward", [*base, "[True, True, True]"]).flops == 2 * forward
    assert work("aten::convolution_backward", [*base, "[False, True, True]"]).flops == forward


def test_attention_forward_and_backward():
    q = "bf16[4,4,32,16]nc"
    w = work("aten::_scaled_dot_product_fused_attention_overrideable", [q, q, q, "None", "0.", "True", "False", "None"])
    # 16 batch*heads, L = S = 32, E = Ev = 16; is_causal: query i sees i + 1 keys, 32 * 33 / 2 of 32 * 32
    forward = 2 * 16 * 32 * 32 * (16 + 16) * (32 * 33 / 2) / (32 * 32)
    assert (w.family, w.flops) == ("attention", forward)
    assert w.bytes == 2 * (3 * 4 * 4 * 32 * 16 + 4 * 4 * 32 * 16)
    b = work("aten::_scaled_dot_product_fused_attention_overrideable_backward",
             [q, q, q, q, "None", "[True, True, True, False]", q, "f32[4,4,32]", "None", "None", "32", "32", "0.",
              "True", "i64[]", "i64[]", "None"])
    assert b.flops == 2.5 * forward


def test_elementwise_reduction_norm_softmax_embedding_copy():
    add = work("aten::add.Tensor", ["f32[4,32,64]", "bf16[4,32,64]", "1"])
    assert (add.family, add.flops, add.dtype) == ("elementwise", 4 * 32 * 64, "fp32")
    assert add.bytes == 4 * 8192 + 2 * 8192 + 4 * 8192  # reads both, writes the broadcast shape (first's dtype)
    inplace = work("aten::add_.Tensor", ["f32[4,32,64]", "f32[1,1,64]", "1"])
    assert inplace.bytes == 4 * (8192 + 64) + 4 * 8192
    total = work("aten::sum.dim_IntList", ["bf16[128,64]", "[0]", "True", "None"])
    assert (total.family, total.flops) == ("reduction", 128 * 64)
    norm = work("aten::native_layer_norm", ["f32[4,32,64]", "[64]", "f32[64]", "f32[64]", "1e-05"])
    assert (norm.family, norm.flops) == ("norm", 8 * 8192)
    soft = work("aten::_log_softmax", ["bf16[128,256]", "1", "False"])
    assert (soft.family, soft.flops, soft.bytes) == ("softmax", 5 * 128 * 256, 2 * 2 * 128 * 256)
    emb = work("aten::embedding", ["f32[256,64]", "i64[4,32]", "-1", "False", "False"])
    assert (emb.family, emb.flops) == ("embedding", 0)
    assert emb.bytes == 8 * 128 + 2 * 128 * 64 * 4  # indices + gathered rows read and written, not the table
    copy = work("aten::_to_copy", ["f32[64,64]", "BFloat16", "None", "None", "None", "False", "None"])
    assert (copy.family, copy.flops) == ("copy/view", 0)


def test_a_copy_into_an_argument_counts_its_source_read_and_its_destination_written_once():
    """copy_ and an out= overload have the tensor they write among their arguments: read + write, not the
    destination counted a third time as a result of its own."""
    assert work("aten::copy_", ["bf16[64,64]", "bf16[64,64]", "False"]).bytes == 2 * 2 * 4096
    cat = work("aten::cat.out", ["[bf16[64,64], bf16[64,64]]", "0", "bf16[128,64]"])
    assert (cat.family, cat.bytes) == ("copy/view", 2 * (2 * 4096) + 2 * 8192)
    clone = work("aten::clone", ["bf16[64,64]", "None"])
    assert clone.bytes == 2 * 2 * 4096  # a result of its own: read + write


def test_truncated_lists_count_the_omitted_items_at_the_mean():
    # an older simulator: 2 shown tensors of 100 and 300 floats, 2 more omitted: 4 tensors at a mean of 200
    w = work("aten::_foreach_mul_.Tensor", ["[f32[100], f32[300], ...+2]", "f32[]"])
    assert w.bytes == (4 * (100 + 300) + 2 * 800 + 4) + 4 * 800  # reads the list and the scalar, writes the list
    assert w.flops == 800


def test_truncated_lists_carry_the_omitted_items_totals():
    # the embedding first (a big tensor shown), then 30 small ones omitted: their totals, not the mean
    listed = tensor_list("[f32[50257,768], f32[768], ...+30 23040e 92160B]")
    assert (listed.numel, listed.nbytes) == (50257 * 768 + 768 + 23040, 4 * (50257 * 768 + 768) + 92160)
    adam = work("aten::_fused_adamw_", ["[f32[50257,768], f32[768], ...+30 23040e 92160B]"] * 4 + ["[]"] * 2)
    assert adam.flops == 16 * (50257 * 768 + 768 + 23040)
    causal = work("aten::_scaled_dot_product_fused_attention_overrideable",
                  ["bf16[1,1,4,8]", "bf16[1,1,6,8]", "bf16[1,1,6,8]", "None", "0.", "True", "False", "None"])
    full = work("aten::_scaled_dot_product_fused_attention_overrideable",
                ["bf16[1,1,4,8]", "bf16[1,1,6,8]", "bf16[1,1,6,8]", "None", "0.", "False", "False", "None"])
    assert causal.flops == full.flops * (1 + 2 + 3 + 4) / (4 * 6)  # query i sees keys 0..i of 6
    assert causal_fraction(8192, 8192) == pytest.approx(0.5, abs=1e-4)


@pytest.mark.parametrize("op", ["aten::mm", "aten::convolution", "aten::embedding", "aten::nonsense_op"])
def test_malformed_signatures_count_zero_not_crash(op):
    assert work(op, ["?", "None"]).flops == 0


def test_convolution_backward_overrideable_has_no_bias_sizes():
    # what the simulator records for PrivateUse1 (grad_output, input, weight, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask): the first layer needs no grad_input
    sig = ["f32[16,32,32,32]", "f32[16,3,32,32]", "f32[32,3,3,3]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]",
           "1", "[False, True, True]"]
    forward = 2 * (16 * 32 * 32 * 32) * 3 * 9
    assert work("aten::convolution_backward_overrideable", sig).flops == forward


def test_views_move_nothing():
    for op, sig in (("aten::t", ["f32[512,256]"]), ("aten::view", ["f32[64,512]", "[32768]"]),
                    ("aten::detach", ["f32[64,512]"]), ("aten::permute", ["f32[2,3,4]", "[2, 0, 1]"])):
        assert (work(op, sig).bytes, work(op, sig).flops) == (0, 0), op
