#!/usr/bin/env python3
"""fuzz/make_corpus.py - writes the synthetic seed corpus of the fuzz targets (fuzz/corpus/<target>/).

Deterministic (fixed zip timestamps, gzip mtime 0) and standard library only:
    python3 fuzz/make_corpus.py            # rewrites every synthetic file; `git diff` shows changes

The valid checkpoints (corpus/checkpoint/cnn_adam.aether, mlp_sgd.aether) come from Model::save
(fuzz/make_checkpoint_seed.cpp, see fuzz/README.md); the hostile checkpoints here are derived from
cnn_adam.aether, so run that program first when the checkpoint format changes.

Each file stays under 64 KB (libFuzzer's -max_len in fuzz/CMakeLists.txt) and the corpus under
1 MB; this script checks both. Hostile nesting that does not fit 64 KB as raw JSON goes into
checkpoints, whose deflate'd manifest.json shrinks 10^6 levels to a few KB.
"""

import gzip
import io
import json
import lzma
import os
import struct
import sys
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
MAX_FILE = 64 * 1024 - 1
MAX_TOTAL = 1024 * 1024

written = []


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    assert len(data) <= MAX_FILE, f"{target}/{name}: {len(data)} bytes, over the 64 KB limit"
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    written.append((target, name))


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def xz(data):
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)


def nested_array(depth, inner="0"):
    """[[[...inner...]]] nested `depth` deep, built without recursion."""
    return "[" * depth + inner + "]" * depth


def nested_sequential(depth, inner='{"type": "ReLU"}'):
    """A Sequential whose only layer is a Sequential ... `depth` levels deep."""
    return '{"type": "Sequential", "layers": [' * depth + inner + "]}" * depth


def nested_residual(depth, inner='{"type": "ReLU"}'):
    return '{"type": "Residual", "body": ' * depth + inner + "}" * depth


# ---- safetensors --------------------------------------------------------------------------------
def safetensors(header, data=b"", pad=True, length=None):
    """A safetensors file: 8-byte little-endian header length, the header, the data."""
    h = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    h = h.encode()
    if pad:
        h += b" " * (-len(h) % 8)
    n = len(h) if length is None else length
    return struct.pack("<Q", n) + h + data


def tensors(entries, metadata=None):
    """entries: (name, dtype, shape, bytes) -> (header dict, data), packed in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return header, data


def make_safetensors():
    t = "safetensors"
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    h, d = tensors([("w", "F32", [2, 3], f32)], {"format": "pt"})
    write(t, "valid_f32.safetensors", safetensors(h, d))
    h, d = tensors([
        ("f16", "F16", [2], struct.pack("<2e", 1.5, -2)),
        ("bf16", "BF16", [2], b"\x80\x3f\x00\xc0"),
        ("f64", "F64", [1], struct.pack("<d", 3.25)),
        ("i32", "I32", [2], struct.pack("<2i", -7, 7)),
        ("i64", "I64", [1], struct.pack("<q", 1 << 40)),
        ("u8", "U8", [3], b"\x00\x7f\xff"),
        ("flag", "BOOL", [2], b"\x00\x01"),
        ("scalar", "F32", [], struct.pack("<f", 9)),
        ("none", "F32", [0, 4], b""),
    ])
    write(t, "valid_dtypes.safetensors", safetensors(h, d))
    write(t, "valid_empty.safetensors", safetensors({}))
    write(t, "valid_unpadded.safetensors", safetensors(*tensors([("x", "U8", [2, 2], b"abcd")]), pad=False))
    # Invalid: each breaks one rule.
    write(t, "bad_short.safetensors", b"\x08\x00\x00\x00")
    write(t, "bad_length_past_end.safetensors", safetensors(*tensors([("w", "F32", [2, 3], f32)]), length=1 << 20))
    write(t, "bad_length_huge.safetensors", safetensors("{}", length=(1 << 64) - 1))
    write(t, "bad_not_json.safetensors", safetensors('{"w": {"dtype": "F32", '))
    write(t, "bad_nul.safetensors", safetensors('{"a":"\x00"}'))
    write(t, "bad_bool_byte.safetensors", safetensors(*tensors([("b", "BOOL", [2], b"\x01\x02")])))
    write(t, "bad_dtype_i8.safetensors", safetensors(*tensors([("q", "I8", [2], b"\x01\x02")])))
    h, d = tensors([("a", "U8", [4], b"abcd"), ("b", "U8", [4], b"efgh")])
    h["b"]["data_offsets"] = [2, 6]
    write(t, "bad_overlap.safetensors", safetensors(h, d))
    write(t, "bad_trailing.safetensors", safetensors(*tensors([("x", "U8", [2], b"ab")])) + b"zz")
    write(t, "bad_shape_negative.safetensors", safetensors({"x": {"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 0]}}))
    write(t, "bad_shape_overflow.safetensors",
          safetensors({"x": {"dtype": "F64", "shape": [1 << 32, 1 << 32, 1 << 32], "data_offsets": [0, 8]}}, b"\0" * 8))
    write(t, "bad_shape_huge.safetensors",
          safetensors({"x": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 1 << 42]}}, b"\0" * 8))
    write(t, "bad_offsets_float.safetensors", safetensors({"x": {"dtype": "U8", "shape": [1], "data_offsets": [0.0, 1.5]}}, b"a"))
    write(t, "bad_duplicate_name.safetensors",
          safetensors('{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"a"))
    write(t, "bad_metadata_not_string.safetensors", safetensors({"__metadata__": {"k": 1}}))
    # Hostile nesting. 100,000 levels (200 KB) would not fit libFuzzer's 64 KB max_len: 30,000 do.
    write(t, "nested_header_30000.safetensors", safetensors('{"x":' + nested_array(30000) + "}"))
    write(t, "nested_metadata_30000.safetensors", safetensors('{"__metadata__":{"k":' + nested_array(30000) + "}}"))
    write(t, "nested_shape_30000.safetensors",
          safetensors('{"x":{"dtype":"F32","shape":' + nested_array(30000) + ',"data_offsets":[0,0]}}'))


# ---- checkpoints ----------------------------------------------------------------------------------
def zip_bytes(members):
    """members: (name, bytes, deflate?) in order; fixed timestamps, so the bytes are reproducible."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, deflate in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            z.writestr(info, data, compresslevel=9 if deflate else None)
    return buf.getvalue()


def read_members(path):
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def checkpoint(members, manifest_text=None):
    """A checkpoint like the valid one, with its manifest.json text replaced when given."""
    m = dict(members)
    if manifest_text is not None:
        m["manifest.json"] = manifest_text.encode() if isinstance(manifest_text, str) else manifest_text
    return zip_bytes([("manifest.json", m["manifest.json"], True),
                      ("model.safetensors", m["model.safetensors"], False),
                      ("optimizer.safetensors", m["optimizer.safetensors"], False)])


def replace_member(manifest_text, key, value_text):
    """The manifest with top-level member `key` replaced by raw JSON text (may be too deep for json)."""
    m = json.loads(manifest_text)
    placeholder = "@@REPLACED@@"
    m[key] = placeholder
    return json.dumps(m, indent=2).replace(json.dumps(placeholder), value_text)


def make_checkpoints():
    t = "checkpoint"
    valid = os.path.join(CORPUS, t, "cnn_adam.aether")
    if not os.path.exists(valid):
        sys.exit(f"{valid} is missing: build and run make_checkpoint_seed first (fuzz/README.md)")
    members = read_members(valid)
    manifest = members["manifest.json"].decode()
    m = json.loads(manifest)

    # Hostile nesting: the architecture 20,000 Sequentials deep; manifest values 10^6 deep.
    write(t, "deep_sequential_20000.aether", checkpoint(members, replace_member(manifest, "architecture", nested_sequential(20000))))
    write(t, "deep_info_1e6.aether", checkpoint(members, replace_member(manifest, "info", nested_array(10**6))))
    write(t, "deep_architecture_1e6.aether", checkpoint(members, replace_member(manifest, "architecture", nested_array(10**6))))
    tensors_deep = json.dumps(m["tensors"]).replace('"model": [', '"model": [' + nested_array(10**6) + ", ", 1)
    write(t, "deep_tensor_entry_1e6.aether", checkpoint(members, replace_member(manifest, "tensors", tensors_deep)))
    # Claimed sizes: a layer of 2^20 x 2^20 float32 weights (4 TiB) in the architecture.
    huge = dict(m, architecture={"type": "Sequential", "layers": [{"type": "Linear", "in": 1 << 20, "out": 1 << 20, "bias": True}]})
    write(t, "huge_linear.aether", checkpoint(members, json.dumps(huge, indent=2)))

    # Invalid: each breaks one rule.
    write(t, "bad_not_zip.aether", members["manifest.json"][:2000])
    whole = checkpoint(members)
    write(t, "bad_truncated.aether", whole[: len(whole) // 2])
    write(t, "bad_no_model.aether", zip_bytes([("manifest.json", members["manifest.json"], True),
                                               ("optimizer.safetensors", members["optimizer.safetensors"], False)]))
    write(t, "bad_format_version.aether", checkpoint(members, json.dumps(dict(m, format_version=2))))
    write(t, "bad_format.aether", checkpoint(members, json.dumps(dict(m, format="other"))))
    shapes = json.loads(manifest)
    shapes["tensors"]["model"][0]["shape"] = [7, 7]
    write(t, "bad_manifest_shape.aether", checkpoint(members, json.dumps(shapes)))
    arch = json.loads(manifest)
    arch["architecture"]["layers"][0]["type"] = "Conv3d"
    write(t, "bad_architecture_type.aether", checkpoint(members, json.dumps(arch)))
    state = json.loads(manifest)
    state["training_state"]["epoch"] = "one"
    write(t, "bad_training_state.aether", checkpoint(members, json.dumps(state)))
    crc = bytearray(whole)
    at = crc.find(b"model.safetensors", 40) + 200  # inside the stored model.safetensors data
    crc[at] ^= 0xFF
    write(t, "bad_crc.aether", bytes(crc))
    write(t, "bad_empty_zip.aether", zip_bytes([]))


# ---- IDX ------------------------------------------------------------------------------------------
def idx_images(n, rows, cols, pixels=None):
    if pixels is None:
        pixels = bytes((i * 7) % 256 for i in range(n * rows * cols))
    return struct.pack(">IIII", 0x803, n, rows, cols) + pixels


def idx_labels(labels, n=None):
    return struct.pack(">II", 0x801, len(labels) if n is None else n) + bytes(labels)


def make_idx():
    t = "idx"
    images = idx_images(2, 3, 4)
    labels = idx_labels([0, 1, 9, 3, 5])
    write(t, "images_2x3x4.idx", images)
    write(t, "images_2x3x4.idx.gz", gz(images))
    write(t, "images_2x3x4.idx.xz", xz(images))
    write(t, "labels_5.idx", labels)
    write(t, "labels_5.idx.gz", gz(labels))
    write(t, "labels_5.idx.xz", xz(labels))
    write(t, "bad_empty.idx", b"")
    write(t, "bad_magic.idx", struct.pack(">IIII", 0x802, 1, 1, 1) + b"\0")
    write(t, "bad_truncated_images.idx", images[:-3])
    write(t, "bad_trailing_images.idx", images + b"\0")
    write(t, "bad_zero_rows.idx", idx_images(1, 0, 4, b""))
    write(t, "bad_huge_claim.idx", idx_images(0x7FFFFFFF, 1 << 16, 1 << 16, b"\1" * 64))
    write(t, "bad_huge_claim_under_limit.idx.gz", gz(idx_images(1 << 24, 1 << 8, 1 << 8, b"\1" * 4096)))
    write(t, "bad_label_10.idx", idx_labels([1, 10]))
    write(t, "bad_labels_count.idx", idx_labels([1, 2], n=1 << 30))
    bad_crc = bytearray(gz(labels))
    bad_crc[-6] ^= 0xFF  # the CRC32 in the gzip trailer
    write(t, "bad_crc_labels.idx.gz", bytes(bad_crc))
    write(t, "bad_cut_gzip.idx.gz", gz(images)[:-10])
    write(t, "bad_cut_xz.idx.xz", xz(images)[:-12])
    write(t, "bad_gzip_then_garbage.idx.gz", gz(labels) + b"garbage")


# ---- CIFAR-10 -------------------------------------------------------------------------------------
def cifar_record(label, seed):
    return bytes([label]) + bytes((seed + i * 13) % 256 for i in range(3072))


def make_cifar():
    t = "cifar"
    one = cifar_record(3, 1)
    two = cifar_record(0, 2) + cifar_record(9, 3)
    write(t, "one_record.bin", one)
    write(t, "two_records.bin.gz", gz(two))
    write(t, "two_records.bin.xz", xz(two))
    write(t, "bad_empty.bin", b"")
    write(t, "bad_label_10.bin", cifar_record(10, 4))
    write(t, "bad_truncated.bin", one[:3000])
    write(t, "bad_extra_byte.bin", one + b"\0")
    write(t, "bad_cut.bin.gz", gz(two)[:-20])


# ---- architecture / manifest JSON ----------------------------------------------------------------------
def make_architecture():
    t = "architecture"
    members = read_members(os.path.join(CORPUS, "checkpoint", "cnn_adam.aether"))
    manifest = members["manifest.json"].decode()
    m = json.loads(manifest)
    write(t, "manifest_cnn_adam.json", manifest)
    write(t, "manifest_mlp_sgd.json", read_members(os.path.join(CORPUS, "checkpoint", "mlp_sgd.aether"))["manifest.json"])
    write(t, "architecture_cnn.json", json.dumps(m["architecture"], indent=1))
    every_layer = {"type": "Sequential", "layers": [
        {"type": "Conv2d", "in": 3, "out": 4, "kernel": [3, 1], "stride": [1, 2], "padding": [1, 1, 0, 0],
         "dilation": [1, 1], "groups": 1, "bias": False},
        {"type": "Conv2d", "in": 4, "out": 4, "kernel": [3, 3], "stride": [1, 1], "padding": "same",
         "dilation": [2, 2], "groups": 2, "bias": True},
        {"type": "BatchNorm2d", "channels": 4, "momentum": 0.1, "eps": 1e-5, "affine": True},
        {"type": "LeakyReLU", "slope": 0.01}, {"type": "GELU", "tanh_approx": True},
        {"type": "MaxPool2d", "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0]},
        {"type": "AvgPool2d", "kernel": [2, 2], "stride": [1, 1], "padding": [1, 1], "count_include_pad": True},
        {"type": "SpatialDropout", "p": 0.1},
        {"type": "Residual", "body": {"type": "Sequential", "layers": [{"type": "ReLU"}]},
         "shortcut": {"type": "Conv2d", "in": 4, "out": 4, "kernel": [1, 1], "stride": [1, 1], "padding": "same",
                      "dilation": [1, 1], "groups": 1, "bias": False}},
        {"type": "Residual", "body": {"type": "GELU"}},
        {"type": "GlobalMaxPool2d"}, {"type": "Flatten"},
        {"type": "BatchNorm1d", "channels": 4, "momentum": 0.2, "eps": 1e-3, "affine": False},
        {"type": "Dropout", "p": 0.5}, {"type": "Linear", "in": 4, "out": 2, "bias": True},
        {"type": "Softmax", "axis": -1}, {"type": "GlobalAvgPool2d"}]}
    write(t, "architecture_every_layer.json", json.dumps(every_layer, indent=1))
    write(t, "manifest_every_layer.json", json.dumps(dict(m, architecture=every_layer), indent=1))
    # Invalid.
    write(t, "bad_type_number.json", '{"type": 5}')
    write(t, "bad_type_unknown.json", '{"type": "Conv3d"}')
    write(t, "bad_not_object.json", '["Sequential"]')
    write(t, "bad_layers_not_array.json", '{"type": "Sequential", "layers": 5}')
    write(t, "bad_linear_missing.json", '{"type": "Linear", "in": 3}')
    write(t, "bad_linear_negative.json", '{"type": "Linear", "in": -3, "out": 2}')
    write(t, "bad_linear_float.json", '{"type": "Linear", "in": 3.5, "out": 1e300}')
    write(t, "bad_conv_groups_zero.json",
          '{"type": "Conv2d", "in": 4, "out": 4, "kernel": [3, 3], "stride": [1, 1], "padding": [1], "dilation": [1, 1], "groups": 0}')
    write(t, "bad_residual_no_body.json", '{"type": "Residual", "shortcut": {"type": "ReLU"}}')
    write(t, "bad_dropout_p.json", '{"type": "Dropout", "p": 2}')
    write(t, "bad_manifest_no_tensors.json", json.dumps({"format": "aether-checkpoint", "format_version": 1}))
    write(t, "bad_not_json.json", '{"type": "Sequential", "layers": [')
    # Claimed sizes: 4 TiB of Linear weights; a Conv2d of 2^16 x 2^16 channels with 64x64 kernels.
    write(t, "huge_linear.json", '{"type": "Linear", "in": 1048576, "out": 1048576}')
    write(t, "huge_conv.json",
          '{"type": "Conv2d", "in": 65536, "out": 65536, "kernel": [64, 64], "stride": [1, 1], "padding": "same", "dilation": [1, 1], "groups": 1}')
    # Hostile nesting, as deep as fits 64 KB of raw JSON (deeper ones are in corpus/checkpoint).
    write(t, "nested_array_30000.json", nested_array(30000))
    write(t, "nested_architecture_30000.json", '{"architecture": ' + nested_array(30000) + "}")
    write(t, "nested_object_10000.json", '{"a":' * 10000 + "1" + "}" * 10000)
    write(t, "nested_sequential_1700.json", nested_sequential(1700))
    write(t, "nested_residual_2100.json", nested_residual(2100))
    write(t, "nested_manifest_info_30000.json", replace_member(manifest, "info", nested_array(30000)))


# ---- image folders (corpus/image): one file of each kind the readers take ---------------------------

def png(w, h, colour, depth, rows, palette=None, trns=None, interlace=False):
    """A PNG of `rows` (h lists of w sample tuples) with filter 0 on every line."""
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]

    def line(samples):
        if depth >= 8:
            out = b"".join(v.to_bytes(depth // 8, "big") for px in samples for v in px)
        else:  # packed, high bits first
            bits = "".join(format(px[0], f"0{depth}b") for px in samples)
            bits += "0" * (-len(bits) % 8)
            out = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
        return b"\0" + out

    if interlace:  # Adam7: (x0, y0, dx, dy) of the seven passes
        raw = b""
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                               (1, 0, 2, 2), (0, 1, 1, 2)):
            for y in range(y0, h, dy):
                samples = [rows[y][x] for x in range(x0, w, dx)]
                if samples:
                    raw += line(samples)
    else:
        raw = b"".join(line(r) for r in rows)
    assert all(len(px) == channels for r in rows for px in r)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, int(interlace)))
    if palette:
        out += chunk(b"PLTE", bytes(v for c in palette for v in c))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    return out + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def bmp(w, h, bpp, pixels, palette=None, masks=None):
    """A bottom-up BMP with a 40-byte header; pixels: h rows (top first) of w values (palette
    indices, or (r, g, b) for 24 bits, or packed integers for 16 / 32 bits with masks)."""
    rows = []
    for r in reversed(pixels):
        if bpp == 24:
            data = b"".join(bytes((b, g, rr)) for rr, g, b in r)
        elif bpp in (16, 32):
            data = b"".join(v.to_bytes(bpp // 8, "little") for v in r)
        else:
            bits = "".join(format(v, f"0{bpp}b") for v in r)
            bits += "0" * (-len(bits) % 8)
            data = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
        rows.append(data + b"\0" * (-len(data) % 4))
    body = b"".join(rows)
    extra = b"".join(struct.pack("<I", m) for m in masks) if masks else b""
    pal = b"".join(bytes((b, g, r, 0)) for r, g, b in palette) if palette else b""
    offset = 14 + 40 + len(extra) + len(pal)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, bpp, 3 if masks else 0, len(body), 2835, 2835,
                       len(palette) if palette else 0, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(body), 0, 0, offset) + info + extra + pal + body


def gif_lzw(indices, min_size):
    """GIF LZW data for `indices`: literal codes only, a clear code whenever the code width would
    grow, so every code is min_size + 1 bits."""
    clear, end, width = 1 << min_size, (1 << min_size) + 1, min_size + 1
    codes, room = [clear], (1 << width) - ((1 << min_size) + 2)
    for i, v in enumerate(indices):
        if i and i % room == 0:
            codes.append(clear)
        codes.append(v)
    codes.append(end)
    acc = nbits = 0
    out = bytearray()
    for c in codes:
        acc |= c << nbits
        nbits += width
        while nbits >= 8:
            out.append(acc & 255)
            acc >>= 8
            nbits -= 8
    if nbits:
        out.append(acc)
    blocks = b"".join(bytes([len(out[i:i + 255])]) + out[i:i + 255] for i in range(0, len(out), 255))
    return bytes([min_size]) + blocks + b"\0"


def gif(w, h, frames, palette, transparent=None):
    """A GIF89a with a global palette of 4 colours; frames: (left, top, fw, fh, indices, interlaced)."""
    out = b"GIF89a" + struct.pack("<HHBBB", w, h, 0x80 | 0x01, 0, 0) + bytes(v for c in palette for v in c)
    for left, top, fw, fh, indices, interlaced in frames:
        flags = 1 if transparent is not None else 0
        out += b"\x21\xf9\x04" + bytes([flags | 0x04]) + struct.pack("<H", 10) + bytes([transparent or 0]) + b"\0"
        out += b"\x2c" + struct.pack("<HHHHB", left, top, fw, fh, 0x40 if interlaced else 0) + gif_lzw(indices, 2)
    return out + b"\x3b"


def pnm(kind, w, h, maxval, values, comment=False):
    head = f"P{kind}\n" + ("# aether fuzz seed\n" if comment else "") + f"{w} {h}\n{maxval}\n"
    size = 2 if maxval > 255 else 1
    return head.encode() + b"".join(v.to_bytes(size, "big") for v in values)


# Baseline JPEGs written by stb_image_write (stbi_write_jpg): 8x8 RGB at quality 90 and 16x8 grey
# at quality 75, pixel i of the flat array (i * 37) % 256 and (i * 13) % 256.
JPEG_RGB = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb0084000302020302020303030304030304050805050404050a07"
    "0706080c0a0c0c0b0a0b0b0d0e12100d0e110e0b0b1016101113141515150c0f17181614181214151401030404050405"
    "09050509140d0b0d14141414141414141414141414141414141414141414141414141414141414141414141414141414"
    "14141414141414141414ffc00011080008000803012200021101031101ffc401a2000001050101010101010000000000"
    "0000000102030405060708090a0b100002010303020403050504040000017d0102030004110512213141061351610722"
    "7114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a"
    "535455565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8"
    "a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9"
    "fa0100030101010101010101010000000000000102030405060708090a0b110002010204040304070504040001027700"
    "0102031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a2627"
    "28292a35363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788"
    "898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2"
    "e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f008354b1b4b0b0d3f41b1834eb5925118b85"
    "7b98fc890ed48d94b90885312aa0e022c5220c794e175083fe15443ff405f037fe0c747ffe33589e2fff008fdd3ffebd"
    "87fe89f0fd475e960f0f8aad86a32a15542f08c9fbadddcb56f4947f1b9cf0cc6386a1f5895085494e734f9d735b9546"
    "c9765ef6df8f45ffd9")
JPEG_GREY = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb008400080606070605080707070909080a0c140d0c0b0b0c1912"
    "130f141d1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d38323c2e333432010909090c0b0c"
    "180d0d1832211c2132323232323232323232323232323232323232323232323232323232323232323232323232323232"
    "32323232323232323232ffc00011080008001003012200021101031101ffc401a2000001050101010101010000000000"
    "0000000102030405060708090a0b100002010303020403050504040000017d0102030004110512213141061351610722"
    "7114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a"
    "535455565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8"
    "a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9"
    "fa0100030101010101010101010000000000000102030405060708090a0b110002010204040304070504040001027700"
    "0102031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a2627"
    "28292a35363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788"
    "898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2"
    "e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f0064b6d6f6de51d6bc09e4c76f134cd369e8"
    "52354ee5dedcede36e7e63c0e780798ec974d7b746d07c55770cea8c765fed95646c0da3720528339c9c375e9c73e8ba"
    "a7fc93cf11ff00d82aebff0045357837863f82803fffd9")


# JPEGs written by libjpeg-turbo (jpeg_simple_progression; CMYK with its Adobe marker), 8x8 at
# quality 75, value i of the flat array (i * 37) % 256: the progressive and CMYK paths of
# src/data/jpeg_image.cpp.
JPEG_PROGRESSIVE = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300080606070605080707070909080a0c140d0c0b0b0c1912"
    "130f141d1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d38323c2e333432ffdb0043010909"
    "090c0b0c180d0d1832211c21323232323232323232323232323232323232323232323232323232323232323232323232"
    "3232323232323232323232323232ffc20011080008000803012200021101031101ffc400150001010000000000000000"
    "0000000000000002ffc4001501010100000000000000000000000000000103ffda000c030100021003100000019123ff"
    "c40014100100000000000000000000000000000001ffda0008010100010502403fffc400171100030100000000000000"
    "00000000000000011102ffda0008010301013f015a8ac3ffc40018110002030000000000000000000000000001020003"
    "11ffda0008010201013f017b5900c9ffc40019100002030100000000000000000000000001f0021291a1ffda00080101"
    "00063f021015d5efffc4001b100002010500000000000000000000000001110021315191f0ffda0008010100013f2111"
    "a0ef423cf4713fffda000c03010002000300000010f7ffc4001811010100030000000000000000000000000111003191"
    "ffda0008010301013f101b02abb2f33fffc4001811000203000000000000000000000000000001114181ffda00080102"
    "01013f105add4eb3ffc4001a100101000203000000000000000000000001110021314151ffda0008010100013f107ca8"
    "25e0012e8901e01da63fffd9")
JPEG_CMYK = bytes.fromhex(
    "ffd8ffee000e41646f626500640000000000ffdb004300080606070605080707070909080a0c140d0c0b0b0c1912130f"
    "141d1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d38323c2e333432ffc000140800080008"
    "044311004d11005911004b1100ffc4001f0000010501010101010100000000000000000102030405060708090a0bffc4"
    "00b5100002010303020403050504040000017d01020300041105122131410613516107227114328191a1082342b1c115"
    "52d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a535455565758595a63646566"
    "6768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2"
    "c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda000e0443004d005900"
    "4b00003f006aa471451e9d359f9704d993ecf6c14b98b6e5048c484da4a678014e338314437247135fbfd992de39ee2d"
    "90471ec8945aa3ed2b236376188098233b700a0611c7212341d2fe17ff009e6f3dccb6bf82c09091f54d807f7a35ff00"
    "96b252c712d827d992de482dee5c471ec898dd3a6e2b2363765412f8233bb24a063249211fffd9")


def make_image():
    """Valid images of every kind and bit depth the readers take, and hostile ones. The files found
    by fuzzing (finding_*.bin) are kept beside them, not written here."""
    t = "image"
    w, h = 5, 3
    grey = [[((x * 50 + y * 20) % 256,) for x in range(w)] for y in range(h)]
    rgb = [[((x * 50) % 256, (y * 90) % 256, (x * y * 30) % 256) for x in range(w)] for y in range(h)]
    write(t, "grey8.png", png(w, h, 0, 8, grey))
    write(t, "grey16.png", png(w, h, 0, 16, [[(v * 257 + 3,) for (v,) in r] for r in grey]))
    write(t, "grey1.png", png(w, h, 0, 1, [[((x + y) % 2,) for x in range(w)] for y in range(h)]))
    write(t, "grey_alpha.png", png(w, h, 4, 8, [[(v, 255 - v) for (v,) in r] for r in grey]))
    write(t, "rgb8.png", png(w, h, 2, 8, rgb))
    write(t, "rgb16.png", png(w, h, 2, 16, [[tuple(v * 257 for v in px) for px in r] for r in rgb]))
    write(t, "rgba8.png", png(w, h, 6, 8, [[px + (200,) for px in r] for r in rgb]))
    write(t, "palette4_trns.png", png(w, h, 3, 4, [[((x + y) % 3,) for x in range(w)] for y in range(h)],
                                      palette=[(255, 0, 0), (0, 255, 0), (0, 0, 255)], trns=b"\xff\x80\x00"))
    write(t, "interlaced.png", png(9, 9, 2, 8, [[(x * 28, y * 28, 100) for x in range(9)] for y in range(9)],
                                   interlace=True))
    write(t, "rgb24.bmp", bmp(w, h, 24, rgb))
    write(t, "palette8.bmp", bmp(w, h, 8, [[(x + y) % 4 for x in range(w)] for y in range(h)],
                                 palette=[(0, 0, 0), (255, 0, 0), (0, 255, 0), (0, 0, 255)]))
    write(t, "palette4.bmp", bmp(w, h, 4, [[(x * y) % 3 for x in range(w)] for y in range(h)],
                                 palette=[(9, 9, 9), (128, 0, 255), (255, 255, 0)]))
    write(t, "mono1.bmp", bmp(w, h, 1, [[(x + y) % 2 for x in range(w)] for y in range(h)],
                              palette=[(0, 0, 0), (255, 255, 255)]))
    write(t, "rgb565.bmp", bmp(w, h, 16, [[(x * 6) << 11 | (y * 20) << 5 | 7 for x in range(w)] for y in range(h)],
                               masks=(0xF800, 0x07E0, 0x001F)))
    write(t, "rgba32_bitfields.bmp", bmp(w, h, 32, [[x * 40 << 16 | y * 80 << 8 | 60 | 200 << 24 for x in range(w)]
                                                    for y in range(h)], masks=(0xFF0000, 0xFF00, 0xFF)))
    pal = [(0, 0, 0), (255, 0, 0), (0, 255, 0), (255, 255, 255)]
    write(t, "one_frame.gif", gif(w, h, [(0, 0, w, h, [(x + y) % 4 for y in range(h) for x in range(w)], False)], pal))
    write(t, "two_frames_transparent.gif",
          gif(6, 6, [(0, 0, 6, 6, [(x * y) % 4 for y in range(6) for x in range(6)], False),
                     (1, 1, 3, 4, [v % 4 for v in range(12)], True)], pal, transparent=3))
    write(t, "grey8.pgm", pnm(5, w, h, 255, [v for r in grey for (v,) in r], comment=True))
    write(t, "grey16.pgm", pnm(5, w, h, 65535, [v * 257 + 100 for r in grey for (v,) in r]))
    write(t, "rgb8.ppm", pnm(6, w, h, 255, [v for r in rgb for px in r for v in px]))
    write(t, "rgb_maxval1000.ppm", pnm(6, w, h, 1000, [v * 3 for r in rgb for px in r for v in px]))
    write(t, "rgb.jpg", JPEG_RGB)
    write(t, "grey.jpg", JPEG_GREY)
    write(t, "progressive.jpg", JPEG_PROGRESSIVE)
    write(t, "cmyk_adobe.jpg", JPEG_CMYK)
    # Hostile: sizes over AETHER_MAX_IMAGE_PIXELS in a header alone, a truncated PGM, a bad maxval.
    write(t, "huge_header.gif", b"GIF89a\xff\xff\xff\xff\0\0\0")
    write(t, "huge_header.png", png(1, 1, 0, 8, [[(0,)]])[:16] + struct.pack(">II", 65535, 65535) + b"\x08\0\0\0\0")
    write(t, "truncated.pgm", pnm(5, 64, 64, 255, [7] * 100))
    write(t, "maxval_0.pgm", pnm(5, 2, 2, 0, [0] * 4))


def main():
    make_safetensors()
    make_checkpoints()
    make_idx()
    make_cifar()
    make_architecture()
    make_image()
    total = 0
    for target in sorted(os.listdir(CORPUS)):
        for name in os.listdir(os.path.join(CORPUS, target)):
            size = os.path.getsize(os.path.join(CORPUS, target, name))
            assert size <= MAX_FILE, f"{target}/{name}: {size} bytes, over the 64 KB limit"
            total += size
    assert total <= MAX_TOTAL, f"the corpus is {total} bytes, over the 1 MB limit"
    print(f"wrote {len(written)} files; the corpus is {total} bytes")


if __name__ == "__main__":
    main()
