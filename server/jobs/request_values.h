// What a request asks for, as typed values: where its image comes from, the files the
// server writes and what the call streams back. Decoded from the wire once, at the edge
// (server/rpc/request_decode.h); the jobs read these, never the request message.
#ifndef SPEXD_SERVER_REQUEST_VALUES_H_
#define SPEXD_SERVER_REQUEST_VALUES_H_

#include <cstdint>
#include <string>

#include "server/jobs/output_files.h"
#include "server/platform/file_digest.h"

namespace spexd::server {

// Where the image comes from: a file under --data_roots, an upload, or CUDA regions.
struct ImageSource {
  enum class Kind { kServerPath, kUpload, kCuda };
  Kind kind = Kind::kServerPath;
  std::string server_path;  // kServerPath
  std::string upload;       // kUpload: the bytes, once received
  // kCuda: the frame's shape and pixel type, and where its planes start in their regions
  // (CudaRequestRegions holds the regions themselves).
  int height = 0, width = 0;
  bool float64 = false;
  int64_t image_offset = 0, ivar_offset = 0, mask_offset = 0;
  std::string name;           // what the outputs record as the input (in_img_name); may be empty
  std::string fibermap_fits;  // a FIBERMAP table replacing the image's (desi_extract_spectra -f)
};

// The server-written outputs of a request (server_output_path, server_model_path).
struct OutputTarget {
  OutputFile frame;  // the desispec frame file
  OutputFile model;  // the model image; only with a frame file
  FileDigestKind checksum = FileDigestKind::kSha256;  // reported for each file written
  bool overwrite = false;  // an existing file with other content is replaced, not refused
  bool any() const { return !frame.path.empty(); }
};

// What the call streams back besides the header and the summary.
struct ReplyOptions {
  bool file_only = false;       // results_to_file_only: bundles as progress only
  bool stream_model = false;    // want_model: the model image follows the bundles
  bool frame_products = false;  // want_frame_products
  bool float32_arrays = false;  // ARRAY_FLOAT32
  bool cuda_output = false;     // results into the output region (CudaRequestRegions::output)
  int64_t cuda_output_offset = 0;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_REQUEST_VALUES_H_
