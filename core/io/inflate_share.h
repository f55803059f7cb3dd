// How many threads a .fits.gz member inflates on (two chunks each, parallel_inflate.h) when
// several loaders inflate at once on one task pool. Each chunk past the first
// costs a block search, a stretch decoded with window markers, their resolution and a copy
// of its output (docs/performance.md, "Host decode"): on the H100 host
// 1.25x libdeflate's CPU in 2 chunks, 1.48x in 16. One frame alone should use every thread
// (its latency is the request's); eight frames inflating together already fill the pool,
// and splitting each of them 16 ways only spends CPU that the busy host lacks. So a member
// takes its share of the pool's threads: the threads divided by the members inflating at
// that moment, at least 2.
#ifndef SPEXD_CORE_IO_INFLATE_SHARE_H_
#define SPEXD_CORE_IO_INFLATE_SHARE_H_

#include <atomic>

namespace spexd::core {

class InflateShare {
 public:
  // A member's place among those inflating; released when it goes.
  class Claim {
   public:
    Claim(Claim&& other) noexcept : share_(other.share_), threads_(other.threads_) {
      other.share_ = nullptr;
    }
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    Claim& operator=(Claim&&) = delete;
    ~Claim();
    // The threads this member may inflate on at once (the caller's included).
    int threads() const { return threads_; }

   private:
    friend class InflateShare;
    Claim(InflateShare* share, int threads) : share_(share), threads_(threads) {}
    InflateShare* share_;
    int threads_;
  };

  // `threads`: the pool's threads and the caller's. Thread-safe.
  Claim Enter(int threads);
  int active() const { return active_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> active_{0};
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_INFLATE_SHARE_H_
