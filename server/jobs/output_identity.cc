#include "server/jobs/output_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/base/error_text.h"
#include "core/io/fits_same_content.h"

namespace spexd::server {
namespace {

constexpr std::size_t kBlock = std::size_t{1} << 20;

absl::Status Different(const std::string& path, absl::string_view why) {
  return absl::AlreadyExistsError(
      absl::StrCat("output path '", core::EchoValue(path), "' exists with different content (",
                   why, "); set overwrite in the request to replace it"));
}

}  // namespace

absl::StatusOr<ExistingOutput> MatchExistingOutput(
    int fd, const std::vector<absl::string_view>& expected_fits, const std::string& path,
    bool gzip, FileDigestKind kind) {
  auto comparer = core::StoredFitsComparer::Create(expected_fits, gzip, path);
  if (!comparer.ok()) {
    return absl::InternalError(absl::StrCat("cannot compare with the existing output: ",
                                            comparer.status().message()));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat(path, ": fstat failed: ", std::strerror(errno)));
  }
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (!(*comparer)->SizeCanMatch(size)) {
    return Different(path, absl::StrCat("it has ", size, " bytes, the new file ",
                                        (*comparer)->expected_size(), gzip ? " uncompressed" : ""));
  }
  // The hash is of the bytes as they are on disk, as the first reply's was of the bytes
  // it wrote; it is computed in the same pass as the comparison.
  FileDigest digest(kind);
  std::unique_ptr<char[]> block(new char[kBlock]);
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, block.get(), kBlock, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;  // truncated while read: Finish reports it short
    const absl::string_view got(block.get(), static_cast<std::size_t>(n));
    if (!(*comparer)->Feed(got)) return Different(path, (*comparer)->difference());
    digest.Update(got);
    done += n;
  }
  if (!(*comparer)->Finish()) return Different(path, (*comparer)->difference());
  ExistingOutput out;
  out.bytes = done;
  out.digest = digest.HexDigest();
  if (out.digest.empty()) return absl::InternalError(absl::StrCat(path, ": SHA-256 failed"));
  return out;
}

}  // namespace spexd::server
