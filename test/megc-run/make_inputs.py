"""Makes the inputs of the megc-run error tests: .npy inputs, damaged copies
of an artifact and altered safetensors checkpoints.

  make_inputs.py npy DIR
      DIR/ids.npy, DIR/labels.npy (i32 [2,8]), DIR/ids_f32.npy (f32 [2,8]),
      DIR/ids_short.npy (i32 [2,4]).
  make_inputs.py flip IN OUT [OFFSET]
      OUT is IN with the byte at OFFSET (default: the middle) inverted.
  make_inputs.py flip-table IN OUT
      inverts the high byte of the root table's offset to its vtable, a
      FlatBuffers structure the verifier must reject.
  make_inputs.py flip-code IN OUT
      inverts the middle byte of the .text section of the CPU shared object
      embedded in IN (machine code, which only a checksum could protect).
  make_inputs.py truncate IN OUT BYTES
      OUT is the first BYTES bytes of IN.
  make_inputs.py set-version IN OUT VERSION
      OUT is IN with Program.format_version set to VERSION (the field must be
      present in IN, i.e. non-default), resealed (Program.checksum updated)
      so that only the version is wrong.
  make_inputs.py drop-param IN OUT NAME
      OUT is the safetensors file IN without tensor NAME.
  make_inputs.py f16-param IN OUT NAME
      OUT is IN with tensor NAME stored as F16.
  make_inputs.py set-param IN OUT NAME VALUE
      OUT is IN with element 0 of tensor NAME set to VALUE.
  make_inputs.py nan-param IN OUT NAME
      OUT is IN with element 3 of tensor NAME set to NaN.
  make_inputs.py i32-param IN OUT NAME
      OUT is IN with tensor NAME stored as I32.
  make_inputs.py reshape-param IN OUT NAME DIM,DIM...
      OUT is IN with tensor NAME cut or zero-padded to the given shape.
"""
import json
import struct
import sys

import numpy as np


def read(path):
    with open(path, "rb") as f:
        return bytearray(f.read())


def write(path, data):
    with open(path, "wb") as f:
        f.write(bytes(data))


def root_table(data):
    """Offsets of the root table and of its vtable (FlatBuffers layout)."""
    table = struct.unpack_from("<I", data, 0)[0]
    vtable = table - struct.unpack_from("<i", data, table)[0]
    return table, vtable


def text_section_middle(data):
    """Offset in the artifact of the middle byte of the embedded ELF's .text."""
    elf = data.find(b"\x7fELF")
    if elf < 0:
        sys.exit("no ELF image in the artifact")
    shoff = struct.unpack_from("<Q", data, elf + 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, elf + 0x3A)

    def section(i):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
        return struct.unpack_from("<IIQQQQ", data, elf + shoff + i * shentsize)

    names = section(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, offset, size = section(i)
        end = data.index(b"\0", elf + names + name)
        if data[elf + names + name:end] == b".text":
            return elf + offset + size // 2
    sys.exit("no .text section in the embedded ELF image")


def field_offset(data, index):
    """Offset in the artifact of field `index` of the root table (Program),
    or None if the field is not stored."""
    table, vtable = root_table(data)
    vtable_bytes = struct.unpack_from("<H", data, vtable)[0]
    slot = 4 + 2 * index
    if slot + 2 > vtable_bytes:
        return None
    field = struct.unpack_from("<H", data, vtable + slot)[0]
    return table + field if field else None


# Field indices in table Program of runtime/schema/megc.fbs.
FORMAT_VERSION_FIELD = 0
CHECKSUM_FIELD = 7


def reseal(data):
    """Recomputes Program.checksum (FNV-1a 64 of the buffer with the checksum
    read as zero, megrt/ArtifactSeal.h), if the artifact has one."""
    at = field_offset(data, CHECKSUM_FIELD)
    if at is None:
        return
    struct.pack_into("<Q", data, at, 0)
    checksum = 0xCBF29CE484222325
    for byte in bytes(data):
        checksum = ((checksum ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    struct.pack_into("<Q", data, at, checksum)


def set_version(data, version):
    at = field_offset(data, FORMAT_VERSION_FIELD)
    if at is None:
        sys.exit("format_version is not stored in the artifact")
    struct.pack_into("<I", data, at, version)
    reseal(data)


def read_safetensors(path):
    data = read(path)
    size = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__", None)
    body = data[8 + size:]
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", info
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(bytes(body[begin:end]),
                                      np.float32).reshape(info["shape"])
    return tensors


def write_safetensors(path, tensors):
    """tensors: name -> float32, float16 or int32 array."""
    header, blobs, offset = {}, [], 0
    kinds = {np.dtype(np.float16): "F16", np.dtype(np.int32): "I32"}
    for name, array in tensors.items():
        kind = kinds.get(array.dtype, "F32")
        blob = np.ascontiguousarray(
            array, None if kind != "F32" else np.float32).tobytes()
        header[name] = {"dtype": kind,
                        "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    write(path, struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "npy":
        out = args[0]
        ids = (np.arange(16) * 5 % 64).reshape(2, 8).astype(np.int32)
        np.save(f"{out}/ids.npy", ids)
        np.save(f"{out}/labels.npy", (ids + 1) % 64)
        np.save(f"{out}/ids_f32.npy", ids.astype(np.float32))
        np.save(f"{out}/ids_short.npy", ids[:, :4].copy())
    elif command == "flip":
        data = read(args[0])
        offset = int(args[2]) if len(args) > 2 else len(data) // 2
        data[offset] ^= 0xFF
        write(args[1], data)
    elif command == "flip-table":
        data = read(args[0])
        table, _ = root_table(data)
        data[table + 3] ^= 0xFF
        write(args[1], data)
    elif command == "flip-code":
        data = read(args[0])
        data[text_section_middle(data)] ^= 0xFF
        write(args[1], data)
    elif command == "truncate":
        write(args[1], read(args[0])[:int(args[2])])
    elif command == "set-version":
        data = read(args[0])
        set_version(data, int(args[2]))
        write(args[1], data)
    elif command == "drop-param":
        tensors = read_safetensors(args[0])
        del tensors[args[2]]
        write_safetensors(args[1], tensors)
    elif command == "f16-param":
        tensors = read_safetensors(args[0])
        tensors[args[2]] = tensors[args[2]].astype(np.float16)
        write_safetensors(args[1], tensors)
    elif command == "set-param":
        tensors = read_safetensors(args[0])
        tensors[args[2]] = np.array(tensors[args[2]], np.float32)
        tensors[args[2]].reshape(-1)[0] = float(args[3])
        write_safetensors(args[1], tensors)
    elif command == "nan-param":
        tensors = read_safetensors(args[0])
        tensors[args[2]] = np.array(tensors[args[2]], np.float32)
        tensors[args[2]].reshape(-1)[3] = np.nan
        write_safetensors(args[1], tensors)
    elif command == "i32-param":
        tensors = read_safetensors(args[0])
        tensors[args[2]] = tensors[args[2]].astype(np.int32)
        write_safetensors(args[1], tensors)
    elif command == "reshape-param":
        tensors = read_safetensors(args[0])
        shape = tuple(int(d) for d in args[3].split(","))
        old = tensors[args[2]]
        new = np.zeros(shape, np.float32)
        common = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, shape))
        if len(shape) == old.ndim:
            new[common] = old[common]
        tensors[args[2]] = new
        write_safetensors(args[1], tensors)
    else:
        sys.exit(f"unknown command '{command}'")


if __name__ == "__main__":
    main(sys.argv)
