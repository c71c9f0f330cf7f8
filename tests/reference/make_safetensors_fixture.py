#!/usr/bin/env python3
"""Writes tests/safetensors/fixtures/python_ref.safetensors with the reference
(Rust) safetensors library, so test_safetensors checks that orakul reads what
Python/torch users write. Needs only `pip install safetensors numpy` (no torch):
serialize_file takes a TensorSpec (torch dtype name, shape, pointer to raw
little-endian bytes) per tensor, the same call safetensors.torch.save_file
makes (safetensors 0.8; older releases took {"dtype", "shape", "data"} dicts). Run once; the output is committed.
The values are chosen exactly representable in every dtype; the C test
(tests/safetensors/test_safetensors.c, test_python_fixture) hardcodes them."""
import os
import sys

import numpy as np
from safetensors import TensorSpec, serialize_file

VALS = [1.0, -2.5, 0.5, 448.0, 0.0, -0.0078125]  # 0.0078125 = 2^-7


def bf16(vals):
    return (np.array(vals, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()


# OCP F8 E4M3fn / E5M2 encodings of VALS (sign|exp|mant), checked by hand:
#  1.0 = 0 0111 000 / 0 01111 00; -2.5 = 1 1000 010 / 1 10000 01; 0.5 = 0 0110 000 / 0 01110 00;
#  448 = 0 1111 110 / 0 10111 11; 0 = 0; -2^-7 = 1 0000 100 (sub, 4*2^-9) / 1 01000 00
E4M3 = bytes([0x38, 0xC2, 0x30, 0x7E, 0x00, 0x84])
E5M2 = bytes([0x3C, 0xC1, 0x38, 0x5F, 0x00, 0xA0])

SPECS = {  # name: (torch dtype name, shape, raw bytes)
    "a.f32": ("float32", [2, 3], np.array(VALS, "<f4").tobytes()),
    "b.f16": ("float16", [6], np.array(VALS, "<f2").tobytes()),
    "c.bf16": ("bfloat16", [3, 2], bf16(VALS)),
    "d.e4m3": ("float8_e4m3fn", [6], E4M3),
    "e.e5m2": ("float8_e5m2", [6], E5M2),
    "f.i32": ("int32", [3], np.array([-7, 0, 123456], "<i4").tobytes()),
    "g.u8": ("uint8", [1, 1, 3], bytes([0, 7, 255])),
    "h.f64": ("float64", [2], np.array([0.1, -3.0], "<f8").tobytes()),
    "i.i64": ("int64", [1], np.array([-(2**40)], "<i8").tobytes()),
    "j.scalar": ("float32", [], np.array([3.5], "<f4").tobytes()),
    "k.empty": ("bfloat16", [0, 4], b""),
    "l.i8": ("int8", [2], bytes([0xFF, 0x01])),
}
keep = {k: np.frombuffer(v[2] or b"\0", np.uint8).copy() for k, v in SPECS.items()}
tensors = {k: TensorSpec(dtype=d, shape=s, data_ptr=keep[k].ctypes.data, data_len=len(b))
           for k, (d, s, b) in SPECS.items()}

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "safetensors", "fixtures", "python_ref.safetensors")
serialize_file(tensors, out, metadata={"format": "pt", "orakul.fixture": "1"})
print(out)
