// Device memory of another process on this node (CUDA IPC): the region type
// the CUDA backend opens, and the description of a frame that lives in such memory. Plain
// C++: addresses are opaque here and only the CUDA module dereferences them.
#ifndef SPEXD_CORE_DEVICE_REGION_H_
#define SPEXD_CORE_DEVICE_REGION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/io/preproc.h"

namespace spexd::core {

// The size of a CUDA IPC memory handle (cudaIpcMemHandle_t, CUDA_IPC_HANDLE_SIZE).
inline constexpr std::size_t kCudaIpcHandleBytes = 64;

// An allocation of another process mapped into this one (cudaIpcOpenMemHandle). Unmapped
// when destroyed; the owner keeps it alive while any extraction reads or writes it.
// Offsets count from the base of the producer's cudaMalloc allocation.
class ImportedRegion {
 public:
  virtual ~ImportedRegion() = default;
  virtual int device() const = 0;
  // The size the client registered; checked to fit the mapped allocation.
  virtual uint64_t size() const = 0;
  // Device address in this process (valid on device()).
  virtual void* data() const = 0;
  // Copies `bytes` host bytes into [offset, offset + bytes) of the region and waits until
  // the copy is complete on the device, so that the producer may read it once told.
  // Thread-safe (a stream of the region's own). OUT_OF_RANGE past the end, INTERNAL on a
  // CUDA error.
  virtual absl::Status WriteFromHost(uint64_t offset, const void* src, std::size_t bytes) = 0;

  // Several host-to-region copies, complete on the device when this returns, as
  // WriteFromHost each; a region may queue them all and wait once (the CUDA one does:
  // one synchronisation per bundle instead of one per section). Nothing is written when
  // one of them leaves the region (OUT_OF_RANGE).
  struct HostWrite {
    uint64_t offset = 0;
    const void* src = nullptr;
    std::size_t bytes = 0;
  };
  virtual absl::Status WriteManyFromHost(const std::vector<HostWrite>& writes) {
    for (const HostWrite& w : writes) {
      if (w.offset > size() || w.bytes > size() - w.offset) {
        return absl::OutOfRangeError("a write leaves the region");
      }
    }
    for (const HostWrite& w : writes) {
      if (absl::Status s = WriteFromHost(w.offset, w.src, w.bytes); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
};

enum class DevicePixelType { kFloat32, kFloat64 };

inline std::size_t PixelBytes(DevicePixelType type) {
  return type == DevicePixelType::kFloat32 ? 4 : 8;
}

// A preproc frame in device memory: IMAGE and IVAR row-major [height][width] of `type`,
// and an optional MASK of 16-bit integers (the preproc MASK bits). The addresses are
// valid on `device` in this process for the whole extraction. The CUDA backend applies
// the pixel rules (core/numerics/pixel_rules.h) while widening into its workspace.
struct DeviceImageInput {
  int device = -1;
  const void* image = nullptr;
  const void* ivar = nullptr;
  const void* mask = nullptr;  // null: no mask
  DevicePixelType type = DevicePixelType::kFloat32;
  MaskPolicy mask_policy = MaskPolicy::kDesispec;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_DEVICE_REGION_H_
