// Decode tables of the deflate block decoder (inflate_huffman.h): each canonical Huffman
// code of a block (RFC 1951 §3.2.2) becomes a table indexed by the next stream bits.
#ifndef SPEXD_CORE_IO_INTERNAL_INFLATE_TABLES_H_
#define SPEXD_CORE_IO_INTERNAL_INFLATE_TABLES_H_

#include <cstdint>
#include <vector>

namespace spexd::core::internal {

// A table entry: bits 0-7 the bits to drop (the code and the extra bits after it; a
// subtable pointer: the primary index bits), bits 8-11 the code's own length (a pointer:
// the subtable's index bits), bits 12-14 flags, bits 16-30 the value (literal byte,
// length or distance base, subtable offset), bit 31 the literal flag. A length or
// distance is then value + ((bits & mask(drop)) >> code length): one lookup, one shift
// for the code and its extra bits together. The layout serves the fast loop
// (inflate_fast.h): the low byte alone can be subtracted from a bit count kept in a low
// byte, a match entry's bits 8-13 are its code length (a shift by bits 8-13 needs no
// mask: x86 masks the count), and a literal is one sign test. An entry without a flag is
// an invalid code (0: a slot that no code of an incomplete code reaches).
constexpr uint32_t kLitFlag = 1u << 31;    // literal (or a code-length symbol)
constexpr uint32_t kMatchFlag = 1u << 14;  // length (literal/length table) or distance
constexpr uint32_t kSubFlag = 1u << 13;    // pointer to a subtable for a longer code
constexpr uint32_t kEndFlag = 1u << 12;    // end of block
inline uint32_t DropBits(uint32_t e) { return e & 63; }
inline uint32_t CodeBits(uint32_t e) { return (e >> 8) & 15; }
inline uint32_t Value(uint32_t e) { return (e >> 16) & 0x7FFF; }

// Primary table index bits: most codes resolve in one lookup, the longest (to 15 bits,
// RFC 1951 §3.2.7) through a second one.
constexpr unsigned kLitBits = 11, kDistBits = 8, kCodeLenBits = 7;

enum class Alphabet { kLitLen, kDistance, kCodeLength };

// Builds the table of the code with lengths lens[0, n) of `alphabet` (kLitBits, kDistBits
// or kCodeLenBits primary bits). Deflate sends codes MSB first in an LSB-first stream, so
// entries are indexed by the bit-reversed code. False for an over-subscribed code, and for
// an incomplete one except where zlib and libdeflate accept it: a literal/length or
// distance code of a single 1-bit code, or a distance code with no code at all.
bool BuildTable(const uint8_t* lens, unsigned n, Alphabet alphabet, std::vector<uint32_t>* table);

// The fixed codes of BTYPE 01 (RFC 1951 §3.2.6), built on first use.
struct FixedTables {
  std::vector<uint32_t> lit, dist;
};
const FixedTables& Fixed();

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_IO_INTERNAL_INFLATE_TABLES_H_
