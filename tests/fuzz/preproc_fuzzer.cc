// libFuzzer target: the preproc FITS reader on in-memory bytes (the upload path).
// Any input must give a PreprocImage or an error status: never a crash, a leak or UB.
#include <cstddef>
#include <cstdint>

#include "core/io/preproc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spexd::core::PreprocOptions options;
  options.require_fibermap = size % 2 == 0;  // both settings, cheaply
  auto frame = spexd::core::ReadPreprocFromMemory(data, size, "fuzz.fits", options);
  if (frame.ok()) {
    // The reader's contract: image and ivar have height * width finite entries.
    const std::size_t n = static_cast<std::size_t>(frame->height) * frame->width;
    if (frame->image.size() != n || frame->ivar.size() != n) __builtin_trap();
  }
  return 0;
}
