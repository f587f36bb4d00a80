#!/usr/bin/env python3
"""Reads a PNG screenshot (8-bit RGB or RGBA, as Chromium writes them) with the standard library
and says how much of it is drawn: the share of pixels that differ from the background (the most
common colour) and the number of distinct colours. Exits 1 when the page looks blank."""
import struct
import sys
import zlib
from collections import Counter


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {color})")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    for line in rows[::2]:  # every other row and column is enough to judge
        for x in range(0, width, 2):
            yield line[x * bpp:x * bpp + 3]


def main():
    counts = Counter(pixels(sys.argv[1]))
    total = sum(counts.values())
    background, n = counts.most_common(1)[0]
    ink = 1 - n / total
    verdict = f"{100 * ink:.1f} % drawn, {len(counts)} colours"
    print(verdict)
    sys.exit(0 if ink > 0.01 and len(counts) >= 8 else 1)


if __name__ == "__main__":
    main()
