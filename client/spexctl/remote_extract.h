// spexctl extract --server: the same command as a local extraction, run by a spexd
// server. The frame is rebuilt from the stream and written by the same core code, so
// the file matches a local run's.
#ifndef SPEXD_CLIENT_REMOTE_EXTRACT_H_
#define SPEXD_CLIENT_REMOTE_EXTRACT_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/spexctl/cli_args.h"
#include "client/spexctl/extract_flags.h"
#include "client/lib/spexd_client.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::client {

struct RemoteExtractOptions {
  ClientOptions client;
  bool server_paths = false;  // -i and -p name server-side files
  std::string server_output;  // server-side output path, optional
  bool server_overwrite = false;  // it may replace an existing file
  // The checksum the server gives of the files it writes (--server-checksum).
  v1::FileChecksum server_checksum = v1::FILE_CHECKSUM_SHA256;
  // Arrays streamed for a client-written file: float32 (the file's precision, half the
  // stream, the same file) unless asked for float64.
  v1::ArrayPrecision precision = v1::ARRAY_FLOAT32;
  v1::Priority priority = v1::REPROCESSING;
  std::vector<int> bundles, fibers;  // non-empty: ExtractBundles
  bool print_snr = false;
};

absl::StatusOr<RemoteExtractOptions> RemoteExtractOptionsFromArgs(const ParsedArgs& args);

// Loads the PSF (server path or upload) and extracts; returns the rebuilt frame and
// the header cards to write it with. Used by RunRemoteExtract and by tests. Without
// cmd.output the server writes the frame (options.server_output, and cmd.model as a
// server path): nothing is streamed and only `summary` is set.
// With `write_file`, cmd.output is written while the stream arrives (StreamedFrameFile)
// and the frame keeps no resolution, nor from a float32 stream any array but the mask
// (unless options.print_snr): for WritesProgressively commands only.
struct RemoteResult {
  core::Frame frame;
  core::FrameMetadata meta;
  v1::FrameHeader header;
  v1::ExtractSummary summary;
  std::chrono::steady_clock::time_point stream_end;  // the call's status received
  bool file_written = false;  // cmd.output is in place (write_file)
  std::string file_times;     // then, where its time went (for -v)
};
absl::StatusOr<RemoteResult> ExtractRemote(SpexdClient& client, const ExtractCommand& cmd,
                                           const RemoteExtractOptions& options,
                                           bool write_file = false);
// Whether RunRemoteExtract writes cmd.output progressively, as the bundles arrive (.fits
// or .fits.gz): without -m. With -m, after the stream from the whole frame: the same bytes.
bool WritesProgressively(const ExtractCommand& cmd);

absl::Status RunRemoteExtract(const ExtractCommand& cmd, const RemoteExtractOptions& options);

// Median over wavelengths of flux*sqrt(ivar) (bins with ivar > 0) for each fibre.
std::vector<double> MedianSnrPerFiber(const core::Frame& frame);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_REMOTE_EXTRACT_H_
