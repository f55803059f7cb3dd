#!/usr/bin/env python3
"""Lists the images of a CUDA module's fat binaries from their own headers (no cuobjdump).

The .nv_fatbin section of a shared object holds fat binaries back to back, 8-byte
aligned. Each starts with a header (magic 0xBA55ED50, version, header size, size of the
entries that follow); each entry has a header of its own: kind (1 PTX, 2 ELF cubin), header
size, payload size, and the architecture as 10 * major + minor (80, 90, 100).

  fatbin_images.py MODULE                      one line per image: kind arch size sha256
  fatbin_images.py MODULE --require 80,90,100  exit 1 unless an ELF image of each is present
  fatbin_images.py MODULE --require-ptx 100    ... and PTX of at least that architecture

The ctest cuda_module_fatbin_archs (tests/cuda/CMakeLists.txt) runs it on the built module.
"""
import argparse
import hashlib
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KINDS = {1: "ptx", 2: "elf"}


def section(data, name):
    """The bytes of ELF64 section `name`."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    strtab = header(shstrndx)
    for i in range(shnum):
        h = header(i)
        start = strtab[4] + h[0]
        end = data.index(b"\0", start)
        if data[start:end].decode() == name:
            return data[h[4]:h[4] + h[5]]
    raise ValueError("no %s section" % name)


def images(blob):
    """(kind, arch, payload) of every entry of every fat binary in `blob`."""
    out = []
    pos = 0
    while pos + 16 <= len(blob):
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            if blob[pos:pos + 8] == b"\0" * 8:  # padding between fat binaries
                pos += 8
                continue
            raise ValueError("bad fat binary magic 0x%08x at offset %d" % (magic, pos))
        entry, end = pos + hsize, pos + hsize + fsize
        while entry < end:
            kind, _v, ehsize, size = struct.unpack_from("<HHIQ", blob, entry)
            (arch,) = struct.unpack_from("<I", blob, entry + 28)
            payload = blob[entry + ehsize:entry + ehsize + size]
            out.append((KINDS.get(kind, str(kind)), arch, payload))
            entry += ehsize + size
        pos = (end + 7) & ~7
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--require", default="", help="comma-separated architectures needing an ELF image")
    ap.add_argument("--require-ptx", type=int, default=0, help="the least PTX architecture needed")
    args = ap.parse_args()
    data = open(args.module, "rb").read()
    found = images(section(data, ".nv_fatbin"))
    for kind, arch, payload in found:
        print("%s sm_%d %d %s" % (kind, arch, len(payload), hashlib.sha256(payload).hexdigest()))
    ok = True
    for arch in [int(a) for a in args.require.split(",") if a]:
        n = sum(1 for k, a, _ in found if k == "elf" and a == arch)
        if n == 0:
            print("missing: sm_%d (ELF)" % arch, file=sys.stderr)
            ok = False
    if args.require_ptx and not any(k == "ptx" and a >= args.require_ptx for k, a, _ in found):
        print("missing: PTX of compute_%d or newer" % args.require_ptx, file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
