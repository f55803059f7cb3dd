// LRU cache of PSFs and their warm geometries (patch plans and cached spots) under a
// host-memory budget (--psf_cache_bytes). Entries in use by running jobs are shared:
// eviction or unloading only drops the cache's reference. Every geometry the cache drops
// is handed to the releaser (the server's: each backend frees its device state for it).
#ifndef SPEXD_SERVER_PSF_CACHE_H_
#define SPEXD_SERVER_PSF_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/plan/extraction_params.h"
#include "core/plan/geometry.h"
#include "core/io/fits_gunzip.h"
#include "core/io/psf.h"

namespace spexd::server {

class ServerMetrics;

struct PsfSummary {
  std::string id;
  std::string source;
  int nspec = 0;
  double wavemin = 0, wavemax = 0;
  std::string in_psf;
  int64_t host_bytes = 0;  // PSF plus its geometries
  int geometries = 0;
  // The cached geometries themselves (to look up the device memory backends hold for
  // them, Backend::Memory); held only as long as the summary.
  std::vector<std::shared_ptr<const core::Geometry>> geometry_refs;
  bool already_loaded = false;
};

class PsfCache {
 public:
  // Called, outside the cache's lock, for each geometry the cache drops (eviction,
  // unloading); the geometry is alive during the call.
  using GeometryReleaser = std::function<void(const std::shared_ptr<const core::Geometry>&)>;

  // `metrics` may be null; so may `releaser`.
  PsfCache(int64_t budget_bytes, ServerMetrics* metrics, GeometryReleaser releaser = nullptr);

  // Parses a PSF file's bytes and caches it under id = SHA-256(bytes). Idempotent: a
  // PSF already cached is returned with already_loaded set and no parsing. Parsing
  // happens outside the lock. INVALID_ARGUMENT for a malformed PSF, RESOURCE_EXHAUSTED
  // when the PSF alone is larger than the budget.
  // `bytes` may be gzip-compressed (inflated within `limits`); the id is the hash of the
  // bytes as given, so a client can compute it from its file.
  absl::StatusOr<PsfSummary> Load(const std::string& bytes, const std::string& source,
                                  const core::FitsSizeLimits& limits = {});

  // The PSF with this id (counts a hit or a miss); NOT_FOUND when it is not cached.
  absl::StatusOr<std::shared_ptr<const core::Psf>> Get(const std::string& id);

  // The warm geometry for (psf, the request validated against it, image shape), created
  // on a miss. Spots are kept only when their full size fits the budget (else they are
  // evaluated per request). INVALID_ARGUMENT when the image does not fit the PSF.
  // Requests for a geometry already being created wait for that one (and count as hits:
  // the miss count is the count of geometries created), so that a night's first frames,
  // arriving together, plan it once.
  absl::StatusOr<std::shared_ptr<const core::Geometry>> GetGeometry(
      const std::string& psf_id, const std::shared_ptr<const core::Psf>& psf,
      const core::ExtractionPlan& request, int image_height, int image_width);

  // Drops the PSF and its geometries; returns the bytes the cache stops holding.
  // NOT_FOUND for an unknown id.
  absl::StatusOr<int64_t> Unload(const std::string& id);

  // Most recently used first.
  std::vector<PsfSummary> List();

  // Re-measures the geometries (their spots fill in as bundles run) and evicts least
  // recently used entries until the cache fits its budget.
  void Rebalance();

  int64_t bytes();
  int64_t budget() const { return budget_; }

 private:
  struct GeometryEntry {
    std::shared_ptr<const core::Geometry> geometry;
    int64_t bytes = 0;
  };
  struct PsfEntry {
    std::shared_ptr<const core::Psf> psf;
    std::string source;
    int64_t bytes = 0;
    std::map<std::string, GeometryEntry> geometries;  // by Geometry::Key
  };
  // A geometry being created, which later requests for it wait for.
  struct GeometryBuild {
    bool done = false;
    absl::StatusOr<std::shared_ptr<const core::Geometry>> result;
  };
  // A PSF being parsed, which later loads of the same bytes wait for.
  struct PsfParse {
    bool done = false;
    absl::Status status;
  };
  // LRU list items: a PSF (geo_key empty) or one of its geometries.
  struct Item {
    std::string psf_id;
    std::string geo_key;
  };
  using ItemList = std::list<Item>;

  void TouchLocked(const std::string& psf_id, const std::string& geo_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseItemLocked(const std::string& psf_id, const std::string& geo_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t EntryBytesLocked(const PsfEntry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PsfSummary SummaryLocked(const std::string& id, const PsfEntry& e) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Parses the bytes and caches the PSF under `id` (Load's miss).
  absl::StatusOr<PsfSummary> ParseAndInsert(const std::string& id, const std::string& bytes,
                                            const std::string& source,
                                            const core::FitsSizeLimits& limits) ABSL_LOCKS_EXCLUDED(mu_);
  // Hands the geometries dropped so far to the releaser; call without holding mu_.
  void ReleaseDropped() ABSL_LOCKS_EXCLUDED(mu_);

  const int64_t budget_;
  ServerMetrics* const metrics_;
  const GeometryReleaser releaser_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<const core::Geometry>> dropped_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PsfEntry> psfs_ ABSL_GUARDED_BY(mu_);
  ItemList lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  std::map<std::string, ItemList::iterator> where_ ABSL_GUARDED_BY(mu_);  // item key -> lru_
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::shared_ptr<PsfParse>> parsing_ ABSL_GUARDED_BY(mu_);  // by PSF id
  // By PSF id and Geometry::Key.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<GeometryBuild>> building_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_PSF_CACHE_H_
