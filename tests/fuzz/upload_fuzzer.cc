// libFuzzer target: upload chunk assembly (server/rpc/upload_assembly.h), as ExtractFrame and
// LoadPsf use it: an announced size, then chunks of any size. Checked against a model at
// every step: a chunk is taken exactly when it fits in what remains, the bytes are the
// concatenation of the chunks taken, and the upload is complete exactly at the announced
// size.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "server/rpc/upload_assembly.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int64_t announced = in.ConsumeIntegralInRange<int64_t>(1, 1 << 16);
  const int64_t reserve = in.ConsumeIntegralInRange<int64_t>(-1, 1 << 17);
  spexd::server::UploadAssembly upload(announced, reserve);
  std::string model;
  while (in.remaining_bytes() > 0 && !upload.complete()) {
    const std::string chunk = in.ConsumeRandomLengthString(4096);
    const bool fits = static_cast<int64_t>(model.size() + chunk.size()) <= announced;
    if (upload.Append(chunk) != fits) __builtin_trap();
    if (fits) model += chunk;
    if (upload.received() != static_cast<int64_t>(model.size())) __builtin_trap();
    if (upload.complete() != (static_cast<int64_t>(model.size()) == announced)) __builtin_trap();
  }
  if (upload.Take() != model || upload.received() != 0) __builtin_trap();
  return 0;
}
