#include "core/io/internal/inflate_pair.h"

#include "core/io/internal/inflate_fast.h"

namespace spexd::core::internal {
namespace {

// After a block: the run's stopping rules (ByteRun).
void EndBlock(ByteRun& r) {
  r.in_block = false;
  if (r.final || r.in->BitPos() >= r.stop_bit) {
    r.done = true;
  } else if (r.member_end != nullptr && r.begin_bit > r.member_end->load(std::memory_order_relaxed)) {
    r.status = InflateStatus::kNoRoom;
    r.done = true;
  }
}

// The rest of the current block alone (DecodeBody checks every bound and grows the output).
void FinishBlock(ByteRun& r) {
  const InflateStatus s = r.dec->DecodeBody(*r.in, *r.out);
  if (s != InflateStatus::kOk) {
    r.status = s;
    r.done = true;
    return;
  }
  EndBlock(r);
}

// Reads headers (and copies stored blocks) until the run is inside a Huffman block or done.
void EnterBlock(ByteRun& r) {
  while (!r.done && !r.in_block) {
    if (r.dec->ReadHeader(*r.in, &r.final) != InflateStatus::kOk) {
      r.status = InflateStatus::kError;
      r.done = true;
    } else if (r.dec->stored()) {
      FinishBlock(r);
    } else {
      r.in_block = true;
    }
  }
}

bool FastReady(const ByteRun& r) {
  return r.out->cap - r.out->pos >= kFastOutRoom && r.in->FastRoom();
}

FastLoopState<uint8_t> FastState(const ByteRun& r) {
  const BitReader& in = *r.in;
  uint8_t* const data = r.out->data;
  return {in.data() + in.pos(), in.data() + in.size(), in.buffer(), in.count(), data,
          data + r.out->pos, data + r.out->cap, 0, r.dec->lit(), r.dec->dist()};
}

void Resume(const FastLoopState<uint8_t>& f, FastLoopExit exit, ByteRun& r) {
  r.in->Resume(static_cast<std::size_t>(f.in - r.in->data()), f.buf, f.count);
  r.out->pos = static_cast<std::size_t>(f.out - r.out->data);
  if (exit == FastLoopExit::kEnd) {
    EndBlock(r);
  } else if (exit == FastLoopExit::kError) {
    r.status = InflateStatus::kError;
    r.done = true;
  }
}

}  // namespace

void DecodeBytesAlone(ByteRun& r) {
  for (EnterBlock(r); !r.done; EnterBlock(r)) FinishBlock(r);
}

void DecodeBytesPair(ByteRun& a, ByteRun& b) {
  for (;;) {
    EnterBlock(a);
    EnterBlock(b);
    if (a.done || b.done) break;
    // Near a bound (the output's room, the input's end) a run finishes its block alone.
    if (!FastReady(a)) {
      FinishBlock(a);
      continue;
    }
    if (!FastReady(b)) {
      FinishBlock(b);
      continue;
    }
    FastLoopState<uint8_t> fa = FastState(a), fb = FastState(b);
    FastLoopExit exits[2];
    RunFastLoopPair(fa, fb, exits);
    Resume(fa, exits[0], a);
    Resume(fb, exits[1], b);
  }
  DecodeBytesAlone(a);
  DecodeBytesAlone(b);
}

}  // namespace spexd::core::internal
