#include "core/frame/desi_conventions.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// os.path.join(a, b) for the two-part joins desispec makes.
std::string JoinPath(const std::string& a, const std::string& b) {
  if (!b.empty() && b.front() == '/') return b;
  if (a.empty() || a.back() == '/') return a + b;
  return absl::StrCat(a, "/", b);
}

// desispec.io.meta.specprod_root(readonly=...): KeyError (nullopt) without $SPECPROD.
std::optional<std::string> SpecprodRoot(bool readonly) {
  std::optional<std::string> prod = Env("SPECPROD");
  if (!prod.has_value()) return std::nullopt;
  std::string root = *prod;
  if (root.find('/') == std::string::npos) {
    if (auto redux = Env("DESI_SPECTRO_REDUX")) {
      root = JoinPath(*redux, root);
    } else if (auto desi_root = Env("DESI_ROOT")) {
      root = JoinPath(JoinPath(JoinPath(*desi_root, "spectro"), "redux"), root);
    } else {
      return std::nullopt;
    }
  }
  if (readonly) {
    // get_readonly_filepath: $DESI_ROOT -> $DESI_ROOT_READONLY when both are set and differ.
    auto desi_root = Env("DESI_ROOT");
    auto desi_ro = Env("DESI_ROOT_READONLY");
    if (desi_root && desi_ro && *desi_root != *desi_ro && absl::StartsWith(root, *desi_root)) {
      root = *desi_ro + root.substr(desi_root->size());
    }
  }
  return root;
}

}  // namespace

std::string ShortenDesiPath(const std::string& path) {
  if (auto calib = Env("DESI_SPECTRO_CALIB"); calib && absl::StartsWith(path, *calib)) {
    return "SPCALIB" + path.substr(calib->size());
  }
  for (bool readonly : {false, true}) {
    if (auto prod = SpecprodRoot(readonly); prod && absl::StartsWith(path, *prod)) {
      return "SPECPROD" + path.substr(prod->size());
    }
  }
  return path;
}

std::vector<std::pair<std::string, std::string>> DesiEnvironmentDependencies() {
  static const char* const kNames[] = {"DESI_ROOT",          "DESI_SPECTRO_DATA",
                                       "DESI_SPECTRO_REDUX", "SPECPROD",
                                       "DESI_SPECTRO_CALIB", "DESI_BASIS_TEMPLATES",
                                       "DESI_TARGET",        "DESIMODEL"};
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* name : kNames) out.emplace_back(name, Env(name).value_or("NOT_SET"));
  return out;
}

absl::Status NulPadTableStrings(FitsFile* table) {
  fitsfile* f = table->get();
  int status = 0, ncols = 0;
  long nrows = 0;
  fits_get_num_cols(f, &ncols, &status);
  fits_get_num_rows(f, &nrows, &status);
  if (status != 0) return table->Error(status, "reading FIBERMAP layout");
  // Byte offset and size of each character column within a row.
  std::vector<std::pair<long, long>> strings;
  long offset = 0;
  for (int c = 1; c <= ncols; ++c) {
    int type = 0;
    long repeat = 0, width = 0;
    fits_get_coltype(f, c, &type, &repeat, &width, &status);
    if (status != 0) return table->Error(status, "reading FIBERMAP column types");
    if (type < 0) return absl::OkStatus();  // variable-length arrays: leave the table as is
    long bytes = type == TSTRING ? repeat : type == TBIT ? (repeat + 7) / 8 : repeat * width;
    if (type == TSTRING) strings.emplace_back(offset, bytes);
    offset += bytes;
  }
  long naxis1 = 0;
  fits_read_key_lng(f, "NAXIS1", &naxis1, nullptr, &status);
  if (status != 0) return table->Error(status, "reading FIBERMAP NAXIS1");
  // A layout not understood (column sizes that do not add up to the row): left as is.
  if (strings.empty() || nrows == 0 || offset != naxis1) return absl::OkStatus();
  std::vector<unsigned char> row(static_cast<std::size_t>(offset));
  for (long r = 1; r <= nrows; ++r) {
    fits_read_tblbytes(f, r, 1, offset, row.data(), &status);
    if (status != 0) return table->Error(status, "reading FIBERMAP rows");
    bool changed = false;
    for (const auto& [begin, size] : strings) {
      for (long i = begin + size - 1; i >= begin && (row[i] == ' ' || row[i] == '\0'); --i) {
        changed |= row[i] == ' ';
        row[i] = '\0';
      }
    }
    if (changed) fits_write_tblbytes(f, r, 1, offset, row.data(), &status);
    if (status != 0) return table->Error(status, "writing FIBERMAP rows");
  }
  return absl::OkStatus();
}

}  // namespace spexd::core
