"""Reads back the QA page of spexd.qa for the tests: the SVG parsed with xml.etree, its
texts, and each embedded PNG decoded here from its bytes (signature, chunk CRCs, IHDR,
PLTE, the zlib stream of filtered rows) without the encoder's code, so that a wrong
chunk, size, row order or palette fails."""
import base64
import struct
import xml.etree.ElementTree as ET
import zlib

import numpy as np

NS = "{http://www.w3.org/2000/svg}"
PNG_URI = "data:image/png;base64,"


def decode_png(data):
    """(width, height, indices [rows][columns] uint8 or None, rgb [rows][columns][3]) of a
    PNG of 8-bit palette (colour type 3) or RGB (2) pixels, not interlaced, with rows
    filtered by None (0) or Up (2). Raises ValueError on anything else or a bad file."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("no PNG signature")
    chunks, pos = [], 8
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError("truncated chunk")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if len(body) != length or zlib.crc32(kind + body) != crc:
            raise ValueError(f"chunk {kind!r}: bad length or CRC")
        chunks.append((kind, body))
        pos += 12 + length
    kinds = [k for k, _ in chunks]
    if not kinds or kinds[0] != b"IHDR" or kinds[-1] != b"IEND" or b"IDAT" not in kinds:
        raise ValueError(f"chunks {kinds}")
    width, height, depth, colour, method, filtering, interlace = struct.unpack(
        ">IIBBBBB", chunks[0][1])
    if (depth, method, filtering, interlace) != (8, 0, 0, 0) or colour not in (2, 3):
        raise ValueError(f"IHDR {depth, colour, method, filtering, interlace} not read here")
    channels = 3 if colour == 2 else 1
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    if len(raw) != height * (1 + width * channels):
        raise ValueError(f"{len(raw)} bytes of rows for {width} x {height} pixels")
    rows = np.frombuffer(raw, np.uint8).reshape(height, 1 + width * channels)
    pixels = rows[:, 1:].copy()
    for r, kind in enumerate(rows[:, 0]):
        if kind == 2 and r > 0:
            pixels[r] = pixels[r] + pixels[r - 1]  # uint8: modulo 256, as the filter is
        elif kind not in (0, 2):
            raise ValueError(f"row {r}: filter type {kind} not read here")
    if colour == 2:
        return width, height, None, pixels.reshape(height, width, 3)
    plte = [body for kind, body in chunks if kind == b"PLTE"]
    if len(plte) != 1 or len(plte[0]) % 3 or not 0 < len(plte[0]) <= 768:
        raise ValueError("no or a bad PLTE chunk")
    palette = np.frombuffer(plte[0], np.uint8).reshape(-1, 3)
    if pixels.max() >= len(palette):
        raise ValueError(f"index {pixels.max()} beyond {len(palette)} palette entries")
    return width, height, pixels, palette[pixels]


def read_page(path):
    """{"root": the <svg> element, "texts": [(text, fill)], "images": [(the <image>
    element, decode_png of its data)]}, in the order they are drawn."""
    root = ET.parse(path).getroot()
    texts = [("".join(e.itertext()), e.get("fill")) for e in root.iter(NS + "text")]
    images = []
    for e in root.iter(NS + "image"):
        href = e.get("href") or ""
        if not href.startswith(PNG_URI):
            raise ValueError(f"an image that is not an embedded PNG: {href[:40]}")
        images.append((e, decode_png(base64.b64decode(href[len(PNG_URI):], validate=True))))
    return {"root": root, "texts": texts, "images": images}
