// libFuzzer target: the preproc FITS reader on in-memory bytes (the upload path).
// Any input must give a PreprocImage or an error status: never a crash, a leak or UB.
#include <cstddef>
#include <cstdint>

#include "core/io/preproc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spexd::core::PreprocOptions options;
  options.require_fibermap = size % 2 == 0;  // both settings, cheaply
  options.keep_raw = size % 3 == 0;          // the file's bytes, as a GPU server keeps them
  auto frame = spexd::core::ReadPreprocFromMemory(data, size, "fuzz.fits", options);
  if (frame.ok()) {
    const std::size_t n = static_cast<std::size_t>(frame->height) * frame->width;
    if (frame->has_raw_planes()) {
      // Raw planes: height * width words each, and a MASK of as many bits or none; decoded
      // and ruled as for a backend that does not take them.
      if (frame->image_raw.size() != n || frame->ivar_raw.size() != n ||
          (!frame->mask_raw.empty() && frame->mask_raw.size() != n)) {
        __builtin_trap();
      }
      spexd::core::WidenPlanes(&*frame);
    }
    // The reader's contract: image and ivar have height * width finite entries.
    if (frame->image.size() != n || frame->ivar.size() != n) __builtin_trap();
  }
  return 0;
}
