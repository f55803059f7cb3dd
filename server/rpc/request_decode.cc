#include "server/rpc/request_decode.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/error_text.h"
#include "core/base/status_macros.h"
#include "core/io/gzip_name.h"
#include "core/plan/memory_estimate.h"
#include "proto/convert/extraction_params.h"
#include "server/jobs/proto_convert.h"
#include "server/jobs/service_limits.h"

namespace spexd::server {
namespace {

using H = HeaderLimits;

absl::Status CheckLength(const char* field, const std::string& value, std::size_t max_chars) {
  if (value.size() > max_chars) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", value.size(),
                                                   " bytes, over the limit of ", max_chars, ": '",
                                                   core::EchoValue(value), "'"));
  }
  return absl::OkStatus();
}

// Whether the request makes the model image: want_model, or a server_model_path.
bool WantsModel(const v1::ExtractHeader& h) {
  return h.want_model() || !h.server_model_path().empty();
}

// The server-written outputs' rules: results_to_file_only and server_model_path need
// server_output_path, the two paths differ, and file-only results do not go to a CUDA
// output region. INVALID_ARGUMENT.
absl::Status CheckServerOutputs(const v1::ExtractHeader& h) {
  const bool file = !h.server_output_path().empty();
  if (h.results_to_file_only() && !file) {
    return absl::InvalidArgumentError("results_to_file_only needs server_output_path");
  }
  if (!h.server_model_path().empty() && !file) {
    return absl::InvalidArgumentError("server_model_path needs server_output_path");
  }
  if (file && h.server_model_path() == h.server_output_path()) {
    return absl::InvalidArgumentError("server_model_path and server_output_path are the same file");
  }
  if (h.results_to_file_only() && h.has_cuda_output()) {
    return absl::InvalidArgumentError("results_to_file_only and cuda_output are exclusive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> SelectBundles(const v1::ExtractHeader& header, int specmin,
                                               int nspec, int bundlesize) {
  if (header.bundles_size() > 0 && header.fibers_size() > 0) {
    return absl::InvalidArgumentError("set bundles or fibers, not both");
  }
  const int nbundles = bundlesize > 0 ? nspec / bundlesize : 0;
  // 64-bit end: specmin + nspec must not wrap.
  const int64_t fiber_end = static_cast<int64_t>(specmin) + nspec;
  std::set<int> chosen;
  for (int b : header.bundles()) {
    if (b < 0 || b >= nbundles) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bundle ", b, " is outside the plan's bundles [0, ", nbundles, ")"));
    }
    chosen.insert(b);
  }
  for (int f : header.fibers()) {
    if (f < specmin || f >= fiber_end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fibre ", f, " is outside the requested range [", specmin, ", ", fiber_end, ")"));
    }
    chosen.insert((f - specmin) / bundlesize);
  }
  return std::vector<int>(chosen.begin(), chosen.end());
}

namespace {

OutputFile OutputFileNamed(const std::string& path) {
  OutputFile f;
  f.path = path;
  f.gzip = core::IsGzipName(path);
  return f;
}

// The header's fields as the typed request (after the checks: every value is valid).
JobRequest TypedRequest(const v1::ExtractHeader& h) {
  JobRequest r;
  r.psf_id = h.psf_id();
  r.in_psf_name = h.in_psf_name();
  r.client_tag = h.client_tag();
  r.realtime = h.priority() == v1::REALTIME;
  ImageSource& in = r.image;
  switch (h.image_case()) {
    case v1::ExtractHeader::kUploadSize:
      in.kind = ImageSource::Kind::kUpload;
      break;
    case v1::ExtractHeader::kCudaImage: {
      in.kind = ImageSource::Kind::kCuda;
      const v1::CudaImage& c = h.cuda_image();
      in.height = c.height();
      in.width = c.width();
      in.float64 = c.pixel_type() == v1::FLOAT64;
      in.image_offset = c.image().offset();
      in.ivar_offset = c.ivar().offset();
      in.mask_offset = c.mask().offset();
      break;
    }
    default:
      in.kind = ImageSource::Kind::kServerPath;
      in.server_path = h.server_path();
  }
  in.name = h.in_img_name();
  in.fibermap_fits = h.fibermap_fits();
  if (!h.server_output_path().empty()) {
    r.output.frame = OutputFileNamed(h.server_output_path());
    if (!h.server_model_path().empty()) r.output.model = OutputFileNamed(h.server_model_path());
  }
  r.output.checksum = h.output_checksum() == v1::FILE_CHECKSUM_CRC32 ? FileDigestKind::kCrc32
                                                                      : FileDigestKind::kSha256;
  r.output.overwrite = h.overwrite();
  r.reply.file_only = h.results_to_file_only();
  r.reply.stream_model = h.want_model() && !h.results_to_file_only();
  r.reply.frame_products = h.want_frame_products();
  r.reply.float32_arrays = h.array_precision() == v1::ARRAY_FLOAT32;
  r.reply.cuda_output = h.has_cuda_output();
  r.reply.cuda_output_offset = h.cuda_output().region().offset();
  return r;
}

}  // namespace

absl::Status CheckServerPath(const char* field, const std::string& path) {
  if (absl::Status s = CheckLength(field, path, H::kMaxPathChars); !s.ok()) return s;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.size() > H::kMaxPathComponent) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " has a component of ", part.size(), " bytes, over the file system's limit of ",
          H::kMaxPathComponent, ": '", core::EchoValue(part), "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckHeaderFields(const v1::ExtractHeader& h) {
  if (absl::Status s = CheckLength("psf_id", h.psf_id(), H::kMaxPsfIdChars); !s.ok()) return s;
  if (h.has_server_path()) {
    if (absl::Status s = CheckServerPath("server_path", h.server_path()); !s.ok()) return s;
  }
  if (!h.server_output_path().empty()) {
    if (absl::Status s = CheckServerPath("server_output_path", h.server_output_path()); !s.ok()) {
      return s;
    }
  }
  if (!h.server_model_path().empty()) {
    if (absl::Status s = CheckServerPath("server_model_path", h.server_model_path()); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CheckLength("in_img_name", h.in_img_name(), H::kMaxNameChars); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLength("in_psf_name", h.in_psf_name(), H::kMaxNameChars); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLength("client_tag", h.client_tag(), H::kMaxTagChars); !s.ok()) {
    return s;
  }
  // proto3 keeps unknown enum numbers: each must be refused, not read as the default.
  if (!v1::Priority_IsValid(h.priority())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown priority value ", h.priority()));
  }
  if (!v1::ArrayPrecision_IsValid(h.array_precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown array_precision value ", h.array_precision()));
  }
  if (!v1::FileChecksum_IsValid(h.output_checksum())) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown output_checksum value ", h.output_checksum()));
  }
  if (h.bundles_size() > H::kMaxSelections || h.fibers_size() > H::kMaxSelections) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", H::kMaxSelections,
                                                   " bundles or fibers selected"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> CheckServerOutputFiles(const OutputTarget& output,
                                                                const DataRoots& output_roots) {
  std::vector<std::string> canonical;
  if (!output.any()) return canonical;
  DataRoots::WritePolicy policy;
  policy.overwrite = output.overwrite;
  policy.keep_same = true;  // an existing file is compared with the new one at the end
  for (const OutputFile* file : {&output.frame, &output.model}) {
    if (file->path.empty()) continue;
    auto checked = output_roots.CheckOutput(file->path, policy);
    if (!checked.ok()) return checked.status();
    canonical.push_back(*std::move(checked));
  }
  if (canonical.size() == 2 && canonical[0] == canonical[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server_model_path '", core::EchoValue(output.model.path),
        "' and server_output_path '", core::EchoValue(output.frame.path),
        "' are the same file (", core::EchoValue(canonical[0]), ")"));
  }
  return canonical;
}

absl::StatusOr<DecodedRequest> DecodeRequest(const v1::ExtractHeader& h, bool subset,
                                             const ServiceLimits& limits) {
  if (!subset && (h.bundles_size() > 0 || h.fibers_size() > 0)) {
    return absl::InvalidArgumentError(
        "ExtractFrame extracts whole frames; use ExtractBundles for bundles or fibres");
  }
  if (subset && h.bundles_size() == 0 && h.fibers_size() == 0) {
    return absl::InvalidArgumentError("ExtractBundles needs bundles or fibers");
  }
  if (absl::Status s = CheckHeaderFields(h); !s.ok()) return s;
  if (h.psf_id().empty()) return absl::InvalidArgumentError("psf_id is empty");
  switch (h.image_case()) {
    case v1::ExtractHeader::kServerPath:
      if (h.server_path().empty()) return absl::InvalidArgumentError("server_path is empty");
      break;
    case v1::ExtractHeader::kUploadSize:
      if (h.upload_size() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("empty image: upload_size is ", h.upload_size()));
      }
      if (h.upload_size() > limits.max_upload_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "upload of ", h.upload_size(), " bytes is over the server's limit of ",
            limits.max_upload_bytes, " bytes (--max_upload_bytes)"));
      }
      break;
    case v1::ExtractHeader::kCudaImage:
      break;
    default:
      return absl::InvalidArgumentError(
          "the header names no image (server_path, upload_size or cuda_image)");
  }
  if (absl::Status s = CheckServerOutputs(h); !s.ok()) return s;
  DecodedRequest decoded;
  SPEXD_ASSIGN_OR_RETURN(decoded.params, wire::ParamsFromProto(h.params(), WantsModel(h)));
  const core::ExtractionParams& p = decoded.params;
  if (absl::Status s = core::ValidateParamsAlone(p); !s.ok()) return s;
  SPEXD_ASSIGN_OR_RETURN(std::vector<int> bundles,
                         SelectBundles(h, p.specmin, p.nspec, p.bundlesize));
  decoded.request = TypedRequest(h);
  decoded.request.bundles = std::move(bundles);
  return decoded;
}

absl::StatusOr<core::ExtractionPlan> CheckRequest(const core::ExtractionParams& params,
                                                  const core::Psf& psf,
                                                  const ServiceLimits& limits) {
  absl::StatusOr<core::ExtractionPlan> plan = core::ExtractionPlan::Create(params, psf);
  if (!plan.ok()) return plan.status();
  SPEXD_RETURN_IF_ERROR(CheckGridFitsMessage(plan->nwave(), psf.hsizey(), limits));
  // The image is not decoded yet: its size is bounded by the PSF's CCD when known (the
  // geometry refuses a larger image), else by the server's pixel limit.
  const int64_t pixels = psf.npix_x() > 0 && psf.npix_y() > 0
                             ? static_cast<int64_t>(psf.npix_x()) * psf.npix_y()
                             : limits.max_image_pixels;
  const core::MemoryEstimate estimate =
      core::EstimateMemory(*plan, psf, pixels, limits.solver_threads);
  if (estimate.total() > static_cast<double>(limits.max_request_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this request would need about ", estimate.Describe(), ", over the server's limit of ",
        limits.max_request_bytes / 1000000, " MB per request (--max_request_bytes): use a "
        "smaller nwavestep, wavepad or bundle, or fewer fibres"));
  }
  return plan;
}

}  // namespace spexd::server
