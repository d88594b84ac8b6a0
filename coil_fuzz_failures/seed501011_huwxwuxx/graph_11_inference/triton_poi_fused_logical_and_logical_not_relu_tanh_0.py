# triton_poi_fused_logical_and_logical_not_relu_tanh_0
# graph nodes: logical_and (aten.logical_and.default) logical_not (aten.logical_not.default) relu (aten.relu.default) tanh (aten.tanh.default)
# source: /work/main/python/coil/fuzz_programs.py:214: return torch.relu(a)
# source: /work/main/python/coil/fuzz_programs.py:218: return torch.tanh(a)
# source: /work/main/python/coil/fuzz_programs.py:241: return torch.logical_not(a)
# source: /work/main/python/coil/fuzz_programs.py:271: return torch.logical_and(a, b)
# buffers: buf0 buf1 buf2
# decision: fused {buf0} + {buf1}: shares 2 bytes
# decision: fused {buf0,buf1} + {buf2}: shares 2 bytes
# decision: pointwise: x sizes flattened into one xindex (xnumel=1), configs (1, 1 warps)
# decision: int32 index arithmetic (every index < 2^31)
@triton.jit
def triton_poi_fused_logical_and_logical_not_relu_tanh_0(in_ptr0, out_ptr0, out_ptr1, out_ptr2, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    tmp0 = tl.load(in_ptr0 + (0))
    tmp1 = tmp0.to(tl.float32)
    tmp2 = tl.maximum(0.0, tmp1, propagate_nan=tl.PropagateNan.ALL)
    tmp3 = coil_f32_to_bf16(tmp2)
    v_buf0 = tmp3
    tl.store(tl.broadcast_to(out_ptr0 + (0), [XBLOCK]), v_buf0)
    tmp4 = (tmp0.to(tl.float32) != 0)
    tmp5 = (tmp4 == 0)
    tmp6 = tmp4 & tmp5
    v_buf1 = tmp6
    tl.store(tl.broadcast_to(out_ptr1 + (0), [XBLOCK]), v_buf1)
    tmp7 = libdevice.tanh(tmp1)
    tmp8 = coil_f32_to_bf16(tmp7)
    v_buf2 = tmp8
    tl.store(tl.broadcast_to(out_ptr2 + (0), [XBLOCK]), v_buf2)
