#!/usr/bin/env python3
"""How many FITS files are byte for byte a reference file, apart from the checksum dates
(a gzip file, recognised by its magic bytes, is compared inflated).

  frames_identical.py REFERENCE FILE...

CFITSIO stamps the comments of each CHECKSUM and DATASUM card with the time they were
written ("HDU checksum updated 2026-..."), and CHECKSUM covers that header, so two writes
of the same frame differ there and nowhere else. Every other byte (DATASUM's value, data,
padding) must match.
Prints "SAME of TOTAL" and the first differing file; exit 0 when all match.
"""
import gzip
import sys

CARD = 80


def masked(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = bytearray(raw)
    # Header cards sit at multiples of 80 bytes; data blocks never start a card with this
    # text at such an offset by accident in our frames, and a false mask could only hide a
    # difference inside an 8-byte-aligned run that also spells "CHECKSUM=", never add one.
    for i in range(0, len(data) - CARD + 1, CARD):
        if data[i:i + 9] == b"CHECKSUM=":
            data[i:i + CARD] = b" " * CARD
        elif data[i:i + 9] == b"DATASUM =":
            slash = data.find(b"/", i, i + CARD)
            if slash > 0:
                data[slash:i + CARD] = b" " * (i + CARD - slash)
    return bytes(data)


def main():
    ref = masked(sys.argv[1])
    same, first_bad = 0, None
    for path in sys.argv[2:]:
        if masked(path) == ref:
            same += 1
        elif first_bad is None:
            first_bad = path
    print(f"{same} of {len(sys.argv) - 2}" + (f" (first different: {first_bad})" if first_bad else ""))
    return 0 if same == len(sys.argv) - 2 else 1


if __name__ == "__main__":
    sys.exit(main())
