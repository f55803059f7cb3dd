#!/usr/bin/env python3
"""Compares the data of named HDUs of two FITS files byte for byte (stdlib only).

    fits_compare.py A.fits B.fits FLUX IVAR MASK ...
    fits_compare.py --pairs LIST FLUX IVAR MASK ...   (LIST: lines "A.fits B.fits")

Exit 0 when every named HDU exists in both files with identical data bytes (so the
float64 values are bit-identical), 1 otherwise. Headers are not compared: CHECKSUM and
DATASUM comments carry the write time.
"""
import sys

BLOCK = 2880


def hdus(path):
    """Yields (extname, data bytes) for every HDU of the file."""
    with open(path, "rb") as f:
        raw = f.read()
    pos = 0
    while pos < len(raw):
        cards = {}
        while True:
            block = raw[pos:pos + BLOCK]
            if len(block) < BLOCK:
                raise ValueError(f"{path}: truncated header at byte {pos}")
            pos += BLOCK
            done = False
            for i in range(0, BLOCK, 80):
                card = block[i:i + 80].decode("ascii", "replace")
                key = card[:8].strip()
                if key == "END":
                    done = True
                    break
                if card[8:10] == "= ":
                    cards[key] = card[10:].split("/")[0].strip().strip("'").strip()
            if done:
                break
        naxis = int(cards.get("NAXIS", "0"))
        size = 0
        if naxis > 0:
            size = abs(int(cards["BITPIX"])) // 8
            for k in range(1, naxis + 1):
                size *= int(cards[f"NAXIS{k}"])
            size = (size + int(cards.get("PCOUNT", "0"))) * int(cards.get("GCOUNT", "1"))
        yield cards.get("EXTNAME", "PRIMARY"), raw[pos:pos + size]
        pos += (size + BLOCK - 1) // BLOCK * BLOCK


def compare(a_path, b_path, names, verbose=True):
    a, b = dict(hdus(a_path)), dict(hdus(b_path))
    ok = True
    for name in names:
        if name not in a or name not in b:
            print(f"fits_compare: HDU {name} missing ({a_path}: {name in a}, {b_path}: {name in b})")
            ok = False
        elif not a[name]:
            print(f"fits_compare: HDU {name} of {a_path} has no data")
            ok = False
        elif a[name] != b[name]:
            diff = sum(x != y for x, y in zip(a[name], b[name])) + abs(len(a[name]) - len(b[name]))
            print(f"fits_compare: HDU {name} of {a_path} differs ({diff} bytes of {len(a[name])})")
            ok = False
        elif verbose:
            print(f"fits_compare: HDU {name} identical ({len(a[name])} bytes)")
    return ok


def main():
    if sys.argv[1] == "--pairs":
        pairs = [line.split() for line in open(sys.argv[2]) if line.strip()]
        bad = [a for a, b in pairs if not compare(a, b, sys.argv[3:], verbose=False)]
        print(f"fits_compare: {len(pairs) - len(bad)} of {len(pairs)} pairs identical in {', '.join(sys.argv[3:])}")
        return 0 if pairs and not bad else 1
    return 0 if compare(sys.argv[1], sys.argv[2], sys.argv[3:]) else 1


if __name__ == "__main__":
    sys.exit(main())
