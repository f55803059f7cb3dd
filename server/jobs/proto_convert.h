// Conversions between spexd.v1 messages and core types on the server's side. No gRPC here:
// only messages. The request parameters' conversion, shared with the clients, is
// proto/convert/extraction_params.h.
#ifndef SPEXD_SERVER_PROTO_CONVERT_H_
#define SPEXD_SERVER_PROTO_CONVERT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"
#include "core/frame/extraction_result.h"
#include "core/io/plane_buffer.h"
#include "core/plan/patch_plan.h"
#include "core/io/preproc.h"
#include "server/state/psf_cache.h"
#include "server/state/scheduler.h"
#include "server/jobs/service_limits.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

// One serialized ExtractResponse (protobuf wire format) as a sequence of byte ranges,
// so that the large arrays of a bundle reach the transport without being copied into
// protobuf messages first: small framing (tags, lengths, scalar fields) is owned here,
// the payload ranges point into memory that `owner` keeps alive until the message is
// sent. The call side turns the pieces into transport buffers (gRPC slices).
struct WireMessage {
  struct Piece {
    const char* borrowed = nullptr;  // payload kept alive by `owner`; null: `framing` bytes
    std::size_t offset = 0;          // into `framing` when not borrowed
    std::size_t size = 0;
  };
  std::string framing;
  std::vector<Piece> pieces;  // in order
  std::shared_ptr<const void> owner;

  std::size_t ByteSize() const;
  // The message's bytes in one string (tests, small messages).
  std::string Flatten() const;
};

// A message serialized the ordinary way (header, summary, model chunks: all small).
WireMessage EncodeResponse(const v1::ExtractResponse& message);

// ExtractResponse{FrameHeader}: `serialized` (a FrameHeader serialized ahead, off the
// worker's thread) followed by `late` (fields known only when the worker takes the job),
// which protobuf merges into it when parsing.
WireMessage EncodeFrameHeader(std::string serialized, const v1::FrameHeader& late);

// Splits a finalised bundle into ExtractResponse{BundleData} parts of at most
// `max_part_bytes` of array payload each (whole fibres per part, at least one). Counts
// and seconds go on the last part. The arrays are not copied: every part borrows them
// from `bundle`, which the parts keep alive. Parses exactly as the equivalent
// v1::BundleData messages (fields in another order, which protobuf allows).
std::vector<WireMessage> EncodeBundleParts(std::shared_ptr<const core::BundleResult> bundle,
                                           double seconds, std::size_t max_part_bytes);

// EncodeBundleParts for ExtractHeader.array_precision = ARRAY_FLOAT32: flux, ivar,
// resolution and chi2pix rounded once to float32 (copies the parts own) in the *_f32
// fields; no pixmask_fraction or failed_bins (the client gets the mask in FrameProducts).
// A resolution the backend narrowed already (BundleResult::rdiags_f32) is borrowed from
// `bundle` as it is, which the parts then keep alive. The rounded arrays are one block
// from `buffers` (null: a block of its own), given back once gRPC has written the parts:
// a bundle's 3 MB of fresh pages per r bundle otherwise, a page fault per 4 KiB each time.
std::vector<WireMessage> EncodeBundlePartsFloat32(std::shared_ptr<const core::BundleResult> bundle,
                                                  double seconds, std::size_t max_part_bytes,
                                                  core::PlaneBufferPool* buffers = nullptr);
std::size_t BundleBytesPerFiberFloat32(int nwave, int ndiag);

// ExtractResponse{BundleData} for a bundle whose arrays went elsewhere (a CUDA output
// region): bundle, fibres, counts and seconds only, marked last_part.
WireMessage EncodeBundleDone(const core::BundleResult& bundle, double seconds);

// ExtractResponse{ModelChunk} with bytes [offset, offset + size) of the model image
// (float64, host order = little-endian), borrowed from `model`, which it keeps alive.
WireMessage EncodeModelChunk(std::shared_ptr<const std::vector<double>> model, std::size_t offset,
                             std::size_t size);

// Payload bytes one fibre contributes to a BundleData message.
std::size_t BundleBytesPerFiber(int nwave, int ndiag);

// One fibre's row of a bundle goes in one message: a grid of `nwave` bins with `ndiag`
// (the PSF's HSIZEY) whose row exceeds the message limit could never be sent.
// INVALID_ARGUMENT naming the longest grid this server sends (docs/service.md,
// "Parameters"). The one check of that limit, for the request's plan and for a plan
// made again on a corrected grid.
absl::Status CheckGridFitsMessage(int nwave, int ndiag, const ServiceLimits& limits);

void CountsToProto(const core::PatchCounts& counts, v1::PatchCounts* out);

// The FrameHeader of an extraction: the plan's fibres and grid (the exact float64 wave),
// the bundles that will follow (`bundles`, ascending; empty: every plan bundle), and what
// a client needs to write the desispec frame (extraction-spec §5.3): the input image's
// header cards, FIBERMAP and shape, the PSF's IN_PSF (`orig_psf`) and the requested grid
// (`grid`: WAVEMIN/WAVEMAX/WAVESTEP). The fields known only when a worker takes the job
// (queue_seconds, backend) are left unset.
v1::FrameHeader FrameHeaderToProto(const std::string& psf_id, const core::PatchPlan& plan,
                                   const std::vector<int>& bundles, const core::PreprocImage& image,
                                   const std::string& orig_psf, const core::GridRequest& grid);

// The backend's patch counts and stage seconds into `out` (other fields untouched).
void ExtractionSummaryToProto(const core::ExtractionSummary& summary, v1::ExtractSummary* out);

// ---- Admin messages ----

// A cached PSF; its device bytes are its geometries' warm state summed over every
// worker's backend (`memory`, Scheduler::BackendMemory).
void PsfSummaryToProto(const PsfSummary& summary, const std::vector<core::BackendMemory>& memory,
                       v1::PsfInfo* out);

void WorkerStateToProto(const WorkerState& worker, v1::WorkerInfo* out);

// The limits a client may need to know: the service's, the scheduler's effective bounds
// (`load`) and the PSF cache's budget.
void LimitsToProto(const ServiceLimits& limits, const Scheduler::Load& load,
                   int64_t psf_cache_budget_bytes, v1::Limits* out);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_PROTO_CONVERT_H_
