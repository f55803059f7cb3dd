#include "server/jobs/proto_convert.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "core/base/float_convert.h"

namespace spexd::server {
namespace {

// Packed float64 fields (and the model image, documented as little-endian) are the
// doubles' bytes in little-endian order: the arrays are sent as they are in memory.
// Clients and servers are x86-64 or aarch64.
static_assert(std::endian::native == std::endian::little, "wire encoding assumes little-endian");

// Protobuf wire format (https://protobuf.dev/programming-guides/encoding/).
constexpr uint32_t kWireTypeLen = 2;
// ExtractResponse.bundle and the BundleData array fields.
constexpr uint32_t kResponseHeaderField = 1, kResponseBundleField = 2, kResponseModelField = 3;
constexpr uint32_t kModelDataField = 2;
constexpr uint32_t kFluxField = 5, kIvarField = 6, kResolutionField = 7, kChi2Field = 8,
                   kPixmaskField = 9, kFailedBinsField = 10;
constexpr uint32_t kFluxF32Field = 13, kIvarF32Field = 14, kResolutionF32Field = 15,
                   kChi2F32Field = 16;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Appends framing bytes to `m`, merging them with a preceding framing piece.
void AppendFraming(const std::string& bytes, WireMessage* m) {
  if (bytes.empty()) return;
  if (!m->pieces.empty() && m->pieces.back().borrowed == nullptr) {
    m->pieces.back().size += bytes.size();
  } else {
    m->pieces.push_back(WireMessage::Piece{nullptr, m->framing.size(), bytes.size()});
  }
  m->framing += bytes;
}

// A length-delimited field whose payload is borrowed (a packed array or bytes).
void AppendBorrowedField(uint32_t field, const void* data, std::size_t bytes, WireMessage* m) {
  if (bytes == 0) return;  // proto3 omits empty repeated and bytes fields
  std::string head;
  AppendVarint(field << 3 | kWireTypeLen, &head);
  AppendVarint(bytes, &head);
  AppendFraming(head, m);
  m->pieces.push_back(WireMessage::Piece{static_cast<const char*>(data), 0, bytes});
}

// Wraps the message in a length-delimited field `field` of an outer message.
void PrependLenField(uint32_t field, WireMessage* m) {
  std::string head;
  AppendVarint(field << 3 | kWireTypeLen, &head);
  AppendVarint(m->ByteSize(), &head);
  for (WireMessage::Piece& p : m->pieces) {
    if (p.borrowed == nullptr) p.offset += head.size();
  }
  m->framing.insert(0, head);
  if (!m->pieces.empty() && m->pieces.front().borrowed == nullptr &&
      m->pieces.front().offset == head.size()) {
    m->pieces.front().offset = 0;
    m->pieces.front().size += head.size();
  } else {
    m->pieces.insert(m->pieces.begin(), WireMessage::Piece{nullptr, 0, head.size()});
  }
}

}  // namespace

std::size_t WireMessage::ByteSize() const {
  std::size_t n = 0;
  for (const Piece& p : pieces) n += p.size;
  return n;
}

std::string WireMessage::Flatten() const {
  std::string out;
  out.reserve(ByteSize());
  for (const Piece& p : pieces) {
    out.append(p.borrowed != nullptr ? p.borrowed : framing.data() + p.offset, p.size);
  }
  return out;
}

WireMessage EncodeResponse(const v1::ExtractResponse& message) {
  WireMessage m;
  AppendFraming(message.SerializeAsString(), &m);
  return m;
}

std::size_t BundleBytesPerFiber(int nwave, int ndiag) {
  // flux, ivar, chi2pix, pixmask_fraction, 2*ndiag+1 diagonals (float64) + failed flags.
  return static_cast<std::size_t>(nwave) * ((4 + 2 * static_cast<std::size_t>(ndiag) + 1) * 8 + 1);
}

absl::Status CheckGridFitsMessage(int nwave, int ndiag, const ServiceLimits& limits) {
  if (BundleBytesPerFiber(nwave, ndiag) <= MaxPayloadBytes(limits)) return absl::OkStatus();
  const std::size_t longest = MaxPayloadBytes(limits) / BundleBytesPerFiber(1, ndiag);
  return absl::InvalidArgumentError(absl::StrCat(
      "wavelength grid of ", nwave, " bins is too long for this server: one fibre's "
      "row must fit a ", limits.max_message_bytes, "-byte message (--max_message_bytes), "
      "which holds at most ", longest, " bins with this PSF (HSIZEY ", ndiag, ")"));
}

namespace {

// Splits bundle `b` into ExtractResponse{BundleData} parts of whole fibres, at most
// `max_part_bytes` of array payload each (`per_fiber` bytes a fibre), counts and seconds
// on the last part; `append_arrays(first_bin, bins, &message)` adds the array fields of
// bins [first_bin, first_bin + bins), borrowed from memory that `owner` keeps alive.
template <typename AppendArrays>
std::vector<WireMessage> SplitBundle(const core::BundleResult& b, double seconds,
                                     std::size_t max_part_bytes, std::size_t per_fiber,
                                     const std::shared_ptr<const void>& owner,
                                     AppendArrays append_arrays) {
  const std::size_t fit = max_part_bytes / std::max<std::size_t>(1, per_fiber);
  const int fibers_per_part = std::max(1, static_cast<int>(std::min<std::size_t>(fit, 1u << 20)));
  const std::size_t nw = static_cast<std::size_t>(b.nwave);
  std::vector<WireMessage> parts;
  for (int f0 = 0; f0 < b.nfibers || (f0 == 0 && b.nfibers == 0); f0 += fibers_per_part) {
    const int nf = std::min(fibers_per_part, b.nfibers - f0);
    const bool last = f0 + nf >= b.nfibers;
    // Scalars through protobuf (a few dozen bytes), arrays borrowed.
    v1::BundleData scalars;
    scalars.set_bundle(b.bundle);
    scalars.set_fiber_begin(b.fiber_begin + f0);
    scalars.set_nfibers(nf);
    if (last) {
      scalars.set_last_part(true);
      CountsToProto(b.counts, scalars.mutable_counts());
      scalars.set_seconds(seconds);
    }
    // The BundleData body first, then its field header in ExtractResponse in front.
    WireMessage m;
    m.owner = owner;
    AppendFraming(scalars.SerializeAsString(), &m);
    append_arrays(static_cast<std::size_t>(f0) * nw, static_cast<std::size_t>(nf) * nw, &m);
    PrependLenField(kResponseBundleField, &m);
    parts.push_back(std::move(m));
    if (b.nfibers == 0) break;
  }
  return parts;
}

// A bundle's arrays as float32, what the float32 parts borrow: those rounded here one
// after another in one block, and a resolution narrowed by the backend in the bundle.
struct Float32Arrays {
  core::PlaneBuffer<float> block;
  std::shared_ptr<const core::BundleResult> bundle;  // set where rdiags points into it
  const float *flux = nullptr, *ivar = nullptr, *rdiags = nullptr, *chi2pix = nullptr;
};

// The one rounding of a float64 result to float32: the conversion core/frame's writer
// applies (round to nearest even), so that a file written from these values holds the
// same bits as one written from the float64 values. Into `out` as it is: every value is
// written (zeroing first would only add a pass). Returns the end of the values written.
float* RoundToFloat32(const std::vector<double>& v, float* out) {
  core::NarrowToFloat32(v.data(), out, v.size());
  return out + v.size();
}

}  // namespace

std::vector<WireMessage> EncodeBundleParts(std::shared_ptr<const core::BundleResult> bundle,
                                           double seconds, std::size_t max_part_bytes) {
  const core::BundleResult& b = *bundle;
  const std::size_t nk = static_cast<std::size_t>(2 * b.ndiag + 1);
  const std::size_t d = sizeof(double);
  return SplitBundle(b, seconds, max_part_bytes, BundleBytesPerFiber(b.nwave, b.ndiag), bundle,
                     [&](std::size_t off, std::size_t n, WireMessage* m) {
    AppendBorrowedField(kFluxField, b.flux.data() + off, n * d, m);
    AppendBorrowedField(kIvarField, b.ivar.data() + off, n * d, m);
    AppendBorrowedField(kResolutionField, b.rdiags.data() + off * nk, n * nk * d, m);
    AppendBorrowedField(kChi2Field, b.chi2pix.data() + off, n * d, m);
    AppendBorrowedField(kPixmaskField, b.pixmask_fraction.data() + off, n * d, m);
    if (!b.failed_bins.empty()) {
      AppendBorrowedField(kFailedBinsField, b.failed_bins.data() + off, n, m);
    }
  });
}

std::size_t BundleBytesPerFiberFloat32(int nwave, int ndiag) {
  // flux, ivar, chi2pix, 2*ndiag+1 diagonals (float32).
  return static_cast<std::size_t>(nwave) * (3 + 2 * static_cast<std::size_t>(ndiag) + 1) * 4;
}

std::vector<WireMessage> EncodeBundlePartsFloat32(std::shared_ptr<const core::BundleResult> bundle,
                                                  double seconds, std::size_t max_part_bytes,
                                                  core::PlaneBufferPool* buffers) {
  const core::BundleResult& b = *bundle;
  const bool narrowed = b.rdiags.empty() && !b.rdiags_f32.empty();
  const std::size_t rdiags_values = narrowed ? b.rdiags_f32.size() / sizeof(float) : b.rdiags.size();
  auto arrays = std::make_shared<Float32Arrays>();
  arrays->block = core::PlaneBuffer<float>::Make(
      b.flux.size() + b.ivar.size() + b.chi2pix.size() + (narrowed ? 0 : rdiags_values), buffers);
  float* next = arrays->block.data();
  arrays->flux = next;
  next = RoundToFloat32(b.flux, next);
  arrays->ivar = next;
  next = RoundToFloat32(b.ivar, next);
  arrays->chi2pix = next;
  next = RoundToFloat32(b.chi2pix, next);
  if (narrowed) {  // little-endian float32 words, as this host's floats (x86-64, aarch64)
    arrays->rdiags = reinterpret_cast<const float*>(b.rdiags_f32.data());
    arrays->bundle = bundle;
  } else {
    arrays->rdiags = next;
    RoundToFloat32(b.rdiags, next);
  }
  const Float32Arrays& a = *arrays;
  const std::size_t nk = static_cast<std::size_t>(2 * b.ndiag + 1);
  const std::size_t f = sizeof(float);
  return SplitBundle(b, seconds, max_part_bytes, BundleBytesPerFiberFloat32(b.nwave, b.ndiag),
                     arrays, [&](std::size_t off, std::size_t n, WireMessage* m) {
    AppendBorrowedField(kFluxF32Field, a.flux + off, n * f, m);
    AppendBorrowedField(kIvarF32Field, a.ivar + off, n * f, m);
    AppendBorrowedField(kResolutionF32Field, a.rdiags + off * nk, n * nk * f, m);
    AppendBorrowedField(kChi2F32Field, a.chi2pix + off, n * f, m);
  });
}

WireMessage EncodeBundleDone(const core::BundleResult& b, double seconds) {
  v1::ExtractResponse done;
  v1::BundleData* d = done.mutable_bundle();
  d->set_bundle(b.bundle);
  d->set_fiber_begin(b.fiber_begin);
  d->set_nfibers(b.nfibers);
  d->set_last_part(true);
  CountsToProto(b.counts, d->mutable_counts());
  d->set_seconds(seconds);
  return EncodeResponse(done);
}

WireMessage EncodeFrameHeader(std::string serialized, const v1::FrameHeader& late) {
  WireMessage m;
  serialized += late.SerializeAsString();
  AppendFraming(serialized, &m);
  PrependLenField(kResponseHeaderField, &m);
  return m;
}

WireMessage EncodeModelChunk(std::shared_ptr<const std::vector<double>> model, std::size_t offset,
                             std::size_t size) {
  const std::size_t total = model->size() * sizeof(double);
  v1::ModelChunk scalars;
  scalars.set_offset(static_cast<int64_t>(offset));
  scalars.set_total_bytes(static_cast<int64_t>(total));
  WireMessage m;
  AppendFraming(scalars.SerializeAsString(), &m);
  AppendBorrowedField(kModelDataField, reinterpret_cast<const char*>(model->data()) + offset, size, &m);
  m.owner = std::move(model);
  PrependLenField(kResponseModelField, &m);
  return m;
}

void CountsToProto(const core::PatchCounts& c, v1::PatchCounts* out) {
  out->set_extracted(c.extracted);
  out->set_skipped(c.skipped);
  out->set_retried(c.retried);
  out->set_failed(c.failed);
}

v1::FrameHeader FrameHeaderToProto(const std::string& psf_id, const core::PatchPlan& plan,
                                   const std::vector<int>& bundles, const core::PreprocImage& image,
                                   const std::string& orig_psf, const core::GridRequest& grid) {
  v1::FrameHeader h;
  h.set_psf_id(psf_id);
  h.set_specmin(plan.specmin);
  h.set_nspec(plan.nspec);
  h.set_bundlesize(plan.bundlesize);
  h.set_ndiag(plan.ndiag);
  h.mutable_wave()->Add(plan.wave.begin(), plan.wave.end());
  if (bundles.empty()) {
    for (int b = 0; b < plan.nbundles; ++b) h.add_bundles(b);
  } else {
    for (int b : bundles) h.add_bundles(b);
  }
  for (const std::string& card : image.image_header) h.add_image_header(card);
  h.set_fibermap_fits(image.fibermap_fits);
  h.set_orig_psf(orig_psf);
  h.set_wavemin(grid.wmin);
  h.set_wavemax(grid.wmax);
  h.set_wavestep(grid.dw);
  h.set_image_height(image.height);
  h.set_image_width(image.width);
  return h;
}

void ExtractionSummaryToProto(const core::ExtractionSummary& summary, v1::ExtractSummary* out) {
  CountsToProto(summary.counts, out->mutable_counts());
  for (const auto& [stage, secs] : summary.stage_seconds) (*out->mutable_stage_seconds())[stage] = secs;
}

namespace {

int64_t GpuBytes(const PsfSummary& s, const std::vector<core::BackendMemory>& memory) {
  int64_t total = 0;
  for (const core::BackendMemory& m : memory) {
    for (const auto& g : s.geometry_refs) {
      auto it = m.geometry_bytes.find(g.get());
      if (it != m.geometry_bytes.end()) total += it->second;
    }
  }
  return total;
}

}  // namespace

void PsfSummaryToProto(const PsfSummary& s, const std::vector<core::BackendMemory>& memory,
                       v1::PsfInfo* out) {
  out->set_id(s.id);
  out->set_source(s.source);
  out->set_nspec(s.nspec);
  out->set_wavemin(s.wavemin);
  out->set_wavemax(s.wavemax);
  out->set_host_bytes(s.host_bytes);
  out->set_gpu_bytes(GpuBytes(s, memory));
  out->set_geometries(s.geometries);
  out->set_already_loaded(s.already_loaded);
  out->set_in_psf(s.in_psf);
}

void WorkerStateToProto(const WorkerState& w, v1::WorkerInfo* out) {
  out->set_index(w.index);
  out->set_backend(w.backend);
  out->set_description(w.description);
  out->set_healthy(w.healthy);
  out->set_gpu_device(w.gpu_device);
  out->set_busy(w.busy);
}

void LimitsToProto(const ServiceLimits& limits, const Scheduler::Load& load,
                   int64_t psf_cache_budget_bytes, v1::Limits* out) {
  out->set_max_message_bytes(limits.max_message_bytes);
  out->set_max_upload_bytes(limits.max_upload_bytes);
  out->set_max_image_pixels(limits.max_image_pixels);
  out->set_max_queue(load.max_queue);
  out->set_max_uploads(load.max_uploads);
  out->set_realtime_reserve(load.realtime_reserve);
  out->set_upload_idle_seconds(limits.upload_idle_seconds);
  out->set_write_timeout_seconds(limits.write_timeout_seconds);
  out->set_psf_cache_budget_bytes(psf_cache_budget_bytes);
}

}  // namespace spexd::server
