"""A corpus of corrupted GGUF files made from one valid model: truncated at each section, flipped
header bytes, huge counts and lengths, wrong value types, bad tensor descriptions.

``corpus(valid, out_dir)`` writes the files and returns ``{name: path}``. The sections are found
with the ``gguf`` package's reader (field and tensor-info offsets), so each cut lands exactly on
a boundary or inside a structure.
"""

from __future__ import annotations

import struct
from pathlib import Path

from gguf import GGUFReader

U64_HUGE = (1 << 62).to_bytes(8, "little")


def _sections(data: bytes, path: Path) -> dict[str, int]:
    """Byte offsets of the structures of a GGUF file."""
    reader = GGUFReader(path)
    fields = list(reader.fields.values())
    kv_fields = [f for f in fields if not f.name.startswith("GGUF.")]
    first_kv = kv_fields[0].offset
    last_kv = kv_fields[-1]
    tensors = reader.tensors
    end_of_kv = last_kv.offset + sum(p.nbytes for p in last_kv.parts)
    return {
        "header": 24,
        "first_kv": first_kv,
        "mid_kv": kv_fields[len(kv_fields) // 2].offset + 10,
        "end_of_kv": end_of_kv,  # the tensor infos start here
        "mid_tensor_infos": (end_of_kv + tensors[0].data_offset) // 2,
        "tensor_data": int(tensors[0].data_offset),
        "mid_tensor_data": (int(tensors[0].data_offset) + len(data)) // 2,
        "last_byte": len(data) - 1,
    }


def _patch(data: bytes, offset: int, new: bytes) -> bytes:
    return data[:offset] + new + data[offset + len(new) :]


def corpus(valid: Path, out_dir: Path) -> dict[str, Path]:
    data = valid.read_bytes()
    sec = _sections(data, valid)
    reader = GGUFReader(valid)
    kv = [f for f in reader.fields.values() if not f.name.startswith("GGUF.")]
    string_kv = next(f for f in kv if len(f.types) == 1 and f.types[0].name == "STRING")
    array_kv = next((f for f in kv if f.types and f.types[0].name == "ARRAY"), None)
    variants: dict[str, bytes] = {}
    for name, cut in sec.items():  # truncated at (or inside) each section
        variants[f"truncated_at_{name}"] = data[:cut]
    variants["empty"] = b""
    variants["bad_magic"] = _patch(data, 0, b"GGUX")
    variants["version_0"] = _patch(data, 4, struct.pack("<I", 0))
    variants["version_99"] = _patch(data, 4, struct.pack("<I", 99))
    variants["huge_tensor_count"] = _patch(data, 8, U64_HUGE)
    variants["huge_kv_count"] = _patch(data, 16, U64_HUGE)
    variants["zero_kv_count"] = _patch(data, 16, struct.pack("<Q", 0))
    variants["tensor_count_plus_one"] = _patch(data, 8, struct.pack("<Q", len(reader.tensors) + 1))
    # a key's length, then a string value's length, made huge
    variants["huge_key_length"] = _patch(data, kv[0].offset, U64_HUGE)
    key_len = int.from_bytes(data[string_kv.offset : string_kv.offset + 8], "little")
    value_type_at = string_kv.offset + 8 + key_len
    variants["huge_string_length"] = _patch(data, value_type_at + 4, U64_HUGE)
    variants["unknown_value_type"] = _patch(data, value_type_at, struct.pack("<I", 4242))
    variants["string_typed_as_u32"] = _patch(data, value_type_at, struct.pack("<I", 4))
    if array_kv is not None:
        a_key_len = int.from_bytes(data[array_kv.offset : array_kv.offset + 8], "little")
        a_type_at = array_kv.offset + 8 + a_key_len
        variants["huge_array_length"] = _patch(data, a_type_at + 8, U64_HUGE)
        variants["array_of_unknown_type"] = _patch(data, a_type_at + 4, struct.pack("<I", 4242))
    # the first tensor info: name length, n_dims, a dimension, its type, its data offset
    t0 = sec["end_of_kv"]
    name_len = int.from_bytes(data[t0 : t0 + 8], "little")
    dims_at = t0 + 8 + name_len
    variants["tensor_name_huge_length"] = _patch(data, t0, U64_HUGE)
    variants["tensor_n_dims_99"] = _patch(data, dims_at, struct.pack("<I", 99))
    variants["tensor_dim_huge"] = _patch(data, dims_at + 4, U64_HUGE)
    n_dims = int.from_bytes(data[dims_at : dims_at + 4], "little")
    type_at = dims_at + 4 + 8 * n_dims
    variants["tensor_type_unknown"] = _patch(data, type_at, struct.pack("<I", 4242))
    variants["tensor_offset_past_end"] = _patch(data, type_at + 4, U64_HUGE)
    variants["tensor_offset_misaligned"] = _patch(data, type_at + 4, struct.pack("<Q", 3))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, content in variants.items():
        path = out_dir / f"{name}.gguf"
        path.write_bytes(content)
        paths[name] = path
    return paths
