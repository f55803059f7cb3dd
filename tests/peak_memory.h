// The peak resident memory of this process around a piece of work: the peak is reset
// through /proc/self/clear_refs (proc(5): "5" resets VmHWM to VmRSS), then read back. The
// tests of what a hostile input may cost measure a refusal so, uploaded and by path.
#ifndef SPEXD_TESTS_PEAK_MEMORY_H_
#define SPEXD_TESTS_PEAK_MEMORY_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace spexd::testing {

// A field of /proc/self/status in bytes (VmRSS, VmHWM), or -1.
inline int64_t ResidentBytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream s(line.substr(field.size() + 1));
      int64_t kb = -1;
      s >> kb;
      return kb * 1024;
    }
  }
  return -1;
}

// The peak resident set that `work` adds over the set before it; -1 where the kernel does
// not let the peak be reset.
template <typename F>
int64_t PeakExtraResident(F&& work) {
  std::ofstream reset("/proc/self/clear_refs");
  reset << "5";
  reset.flush();
  const bool can = static_cast<bool>(reset);
  reset.close();
  const int64_t before = ResidentBytes("VmRSS");
  work();
  return can && before > 0 ? ResidentBytes("VmHWM") - before : -1;
}

// Under a sanitizer a measured peak is more than the product's own. AddressSanitizer keeps
// freed blocks resident in its quarantine (256 MB by default, to catch use after free) and
// gives every block shadow memory; ThreadSanitizer gives the memory instrumented code
// touches shadow memory several times its size. Bars on a peak are scaled by this factor
// there (the hostile-gzip server test measured 70 MB under TSan
// against 52-56 MB without).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int64_t kPeakBarScale = 2;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr int64_t kPeakBarScale = 2;
#else
inline constexpr int64_t kPeakBarScale = 1;
#endif
#else
inline constexpr int64_t kPeakBarScale = 1;
#endif

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_PEAK_MEMORY_H_
