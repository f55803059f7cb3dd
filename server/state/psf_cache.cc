#include "server/state/psf_cache.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/error_text.h"
#include "server/platform/content_id.h"
#include "server/platform/metrics.h"

namespace spexd::server {
namespace {

std::string ItemKey(const std::string& psf_id, const std::string& geo_key) {
  return geo_key.empty() ? psf_id : absl::StrCat(psf_id, "|", geo_key);
}

}  // namespace

PsfCache::PsfCache(int64_t budget_bytes, ServerMetrics* metrics, GeometryReleaser releaser)
    : budget_(budget_bytes), metrics_(metrics), releaser_(std::move(releaser)) {
  absl::MutexLock lock(&mu_);
  PublishLocked();
}

absl::StatusOr<PsfSummary> PsfCache::Load(const std::string& bytes, const std::string& source,
                                          const core::FitsSizeLimits& limits) {
  const std::string id = Sha256Hex(bytes);
  if (id.empty()) return absl::InternalError("cannot hash the PSF (OpenSSL failure)");
  std::shared_ptr<PsfParse> parse;
  {
    absl::MutexLock lock(&mu_);
    for (;;) {
      auto it = psfs_.find(id);
      if (it != psfs_.end()) {
        if (metrics_ != nullptr) metrics_->CountCache("psf", "hit");
        TouchLocked(id, "");
        PsfSummary s = SummaryLocked(id, it->second);
        s.already_loaded = true;
        return s;
      }
      auto [p, first] = parsing_.try_emplace(id);
      if (first) {
        p->second = std::make_shared<PsfParse>();
        parse = p->second;
        break;
      }
      // Another request is parsing the same bytes (a night's first frames arrive
      // together): wait for it rather than parse them again, then look once more.
      const std::shared_ptr<PsfParse> pending = p->second;
      mu_.Await(absl::Condition(&pending->done));
      if (!pending->status.ok()) return pending->status;
    }
  }
  if (metrics_ != nullptr) metrics_->CountCache("psf", "miss");
  absl::StatusOr<PsfSummary> summary = ParseAndInsert(id, bytes, source, limits);
  {
    absl::MutexLock lock(&mu_);
    parse->status = summary.status();
    parse->done = true;
    parsing_.erase(id);
  }
  ReleaseDropped();
  return summary;
}

absl::StatusOr<PsfSummary> PsfCache::ParseAndInsert(const std::string& id, const std::string& bytes,
                                                    const std::string& source,
                                                    const core::FitsSizeLimits& limits) {
  auto parsed = core::Psf::LoadFromMemory(bytes.data(), bytes.size(), source, limits);
  if (!parsed.ok()) return parsed.status();
  auto psf = std::make_shared<const core::Psf>(std::move(parsed).value());
  const int64_t psf_bytes = static_cast<int64_t>(psf->MemoryBytes());
  if (psf_bytes > budget_) {
    return absl::ResourceExhaustedError(absl::StrCat("PSF ", source, " needs ", psf_bytes,
                                                     " bytes, more than the cache budget of ",
                                                     budget_, " bytes (--psf_cache_bytes)"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = psfs_.try_emplace(id);
  if (inserted) {  // (loads of the same bytes wait for this one: always new)
    it->second.psf = std::move(psf);
    it->second.source = source;
    it->second.bytes = psf_bytes;
    bytes_ += psf_bytes;
  }
  TouchLocked(id, "");
  EvictLocked();
  PublishLocked();
  return SummaryLocked(id, psfs_.at(id));
}

absl::StatusOr<std::shared_ptr<const core::Psf>> PsfCache::Get(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = psfs_.find(id);
  if (it == psfs_.end()) {
    if (metrics_ != nullptr) metrics_->CountCache("psf", "miss");
    return absl::NotFoundError(absl::StrCat(
        "PSF '", core::EchoValue(id), "' is not loaded on this server (never loaded, unloaded or evicted): "
        "load it again with LoadPsf"));
  }
  if (metrics_ != nullptr) metrics_->CountCache("psf", "hit");
  TouchLocked(id, "");
  return it->second.psf;
}

absl::StatusOr<std::shared_ptr<const core::Geometry>> PsfCache::GetGeometry(
    const std::string& psf_id, const std::shared_ptr<const core::Psf>& psf,
    const core::ExtractionPlan& request, int image_height, int image_width) {
  const std::string key = core::Geometry::Key(request.params(), image_height, image_width);
  int64_t psf_bytes = 0;
  std::shared_ptr<GeometryBuild> build;
  {
    absl::MutexLock lock(&mu_);
    auto it = psfs_.find(psf_id);
    if (it != psfs_.end()) {
      psf_bytes = it->second.bytes;
      auto g = it->second.geometries.find(key);
      if (g != it->second.geometries.end()) {
        if (metrics_ != nullptr) metrics_->CountCache("geometry", "hit");
        TouchLocked(psf_id, "");
        TouchLocked(psf_id, key);
        return g->second.geometry;
      }
    }
    auto [b, first] = building_.try_emplace({psf_id, key});
    if (!first) {
      // Another request is creating it: wait for that one's result.
      const std::shared_ptr<GeometryBuild> pending = b->second;
      if (metrics_ != nullptr) metrics_->CountCache("geometry", "hit");
      mu_.Await(absl::Condition(&pending->done));
      return pending->result;
    }
    b->second = std::make_shared<GeometryBuild>();
    build = b->second;
  }
  if (metrics_ != nullptr) metrics_->CountCache("geometry", "miss");
  const bool keep_spots =
      psf_bytes + static_cast<int64_t>(core::Geometry::SpotsBytes(request, *psf)) <= budget_;
  absl::StatusOr<std::shared_ptr<const core::Geometry>> created =
      core::Geometry::Create(psf, request, image_height, image_width, keep_spots);
  {
    absl::MutexLock lock(&mu_);
    auto it = psfs_.find(psf_id);
    if (created.ok() && it == psfs_.end()) {
      // Unloaded meanwhile: serve this job uncached; backends free their state for it
      // when the job ends (Backend::Release).
      dropped_.push_back(*created);
    } else if (created.ok()) {
      auto [g, inserted] = it->second.geometries.try_emplace(key);
      if (inserted) {
        g->second.geometry = *created;
        g->second.bytes = static_cast<int64_t>((*created)->MemoryBytes());
        bytes_ += g->second.bytes;
      }
      created = g->second.geometry;
      TouchLocked(psf_id, "");
      TouchLocked(psf_id, key);
      EvictLocked();
      PublishLocked();
    }
    build->result = created;
    build->done = true;
    building_.erase({psf_id, key});
  }
  ReleaseDropped();
  return created;
}

absl::StatusOr<int64_t> PsfCache::Unload(const std::string& id) {
  int64_t freed = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = psfs_.find(id);
    if (it == psfs_.end()) return absl::NotFoundError(absl::StrCat("PSF '", core::EchoValue(id), "' is not loaded"));
    freed = EntryBytesLocked(it->second);
    EraseItemLocked(id, "");
    PublishLocked();
  }
  ReleaseDropped();
  return freed;
}

std::vector<PsfSummary> PsfCache::List() {
  absl::MutexLock lock(&mu_);
  std::vector<PsfSummary> out;
  for (const Item& item : lru_) {
    if (!item.geo_key.empty()) continue;
    out.push_back(SummaryLocked(item.psf_id, psfs_.at(item.psf_id)));
  }
  return out;
}

void PsfCache::Rebalance() {
  {
    absl::MutexLock lock(&mu_);
    int64_t total = 0;
    for (auto& [id, e] : psfs_) {
      total += e.bytes;
      for (auto& [key, g] : e.geometries) {
        g.bytes = static_cast<int64_t>(g.geometry->MemoryBytes());
        total += g.bytes;
      }
    }
    bytes_ = total;
    EvictLocked();
    PublishLocked();
  }
  ReleaseDropped();
}

void PsfCache::ReleaseDropped() {
  std::vector<std::shared_ptr<const core::Geometry>> dropped;
  {
    absl::MutexLock lock(&mu_);
    dropped.swap(dropped_);
  }
  if (releaser_ == nullptr) return;
  for (const auto& g : dropped) releaser_(g);
}

int64_t PsfCache::bytes() {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

void PsfCache::TouchLocked(const std::string& psf_id, const std::string& geo_key) {
  const std::string k = ItemKey(psf_id, geo_key);
  auto w = where_.find(k);
  if (w != where_.end()) lru_.erase(w->second);
  lru_.push_front(Item{psf_id, geo_key});
  where_[k] = lru_.begin();
}

void PsfCache::EraseItemLocked(const std::string& psf_id, const std::string& geo_key) {
  auto it = psfs_.find(psf_id);
  if (it == psfs_.end()) return;
  // The lambda runs under the caller's lock; clang's analysis needs to be told so.
  auto drop = [&](const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto w = where_.find(ItemKey(psf_id, key));
    if (w != where_.end()) {
      lru_.erase(w->second);
      where_.erase(w);
    }
  };
  if (!geo_key.empty()) {
    auto g = it->second.geometries.find(geo_key);
    if (g == it->second.geometries.end()) return;
    bytes_ -= g->second.bytes;
    dropped_.push_back(std::move(g->second.geometry));
    it->second.geometries.erase(g);
    drop(geo_key);
    return;
  }
  for (auto& [key, g] : it->second.geometries) {
    bytes_ -= g.bytes;
    dropped_.push_back(std::move(g.geometry));
    drop(key);
  }
  bytes_ -= it->second.bytes;
  drop("");
  psfs_.erase(it);
}

int64_t PsfCache::EntryBytesLocked(const PsfEntry& e) const {
  int64_t total = e.bytes;
  for (const auto& [key, g] : e.geometries) total += g.bytes;
  return total;
}

void PsfCache::EvictLocked() {
  if (lru_.empty()) return;
  // The front item is the one just used, and its PSF is needed by it: neither is
  // evicted, even when they alone exceed the budget (a geometry keeps its spots only when
  // they fit, so that case is a plan without spots).
  const Item keep = lru_.front();
  while (bytes_ > budget_) {
    auto victim = lru_.end();
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      const bool is_keep = it->psf_id == keep.psf_id && it->geo_key == keep.geo_key;
      const bool keeps_psf = it->psf_id == keep.psf_id && it->geo_key.empty();
      if (!is_keep && !keeps_psf) {
        victim = std::prev(it.base());
        break;
      }
    }
    if (victim == lru_.end()) break;
    const Item item = *victim;
    if (metrics_ != nullptr) {
      metrics_->CountCache(item.geo_key.empty() ? "psf" : "geometry", "eviction");
    }
    EraseItemLocked(item.psf_id, item.geo_key);
  }
}

void PsfCache::PublishLocked() {
  if (metrics_ == nullptr) return;
  double geometries = 0;
  for (const auto& [id, e] : psfs_) geometries += static_cast<double>(e.geometries.size());
  metrics_->SetCacheState(static_cast<double>(bytes_), static_cast<double>(budget_),
                          static_cast<double>(psfs_.size()), geometries);
}

PsfSummary PsfCache::SummaryLocked(const std::string& id, const PsfEntry& e) const {
  PsfSummary s;
  s.id = id;
  s.source = e.source;
  s.nspec = e.psf->nspec();
  s.wavemin = e.psf->wavemin();
  s.wavemax = e.psf->wavemax();
  s.in_psf = e.psf->in_psf().value_or("");
  s.host_bytes = EntryBytesLocked(e);
  s.geometries = static_cast<int>(e.geometries.size());
  for (const auto& [key, g] : e.geometries) s.geometry_refs.push_back(g.geometry);
  return s;
}

}  // namespace spexd::server
