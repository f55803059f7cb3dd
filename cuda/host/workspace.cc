#include "cuda/host/workspace.h"

#include <algorithm>

#include "core/base/status_macros.h"

namespace spexd::cuda {
namespace {

std::size_t Sz(int64_t v) { return static_cast<std::size_t>(std::max<int64_t>(v, 0)); }

}  // namespace

std::size_t WorkspaceSpec::SlotBytes() const {
  const std::size_t d = sizeof(double);
  std::size_t bytes = d * (Sz(int64_t{ld} * ld) + 4 * Sz(ld) + Sz(t_stride()) +
                           Sz(int64_t{nper} * nt * nt) + Sz(int64_t{nper} * nt) + 3 * Sz(max_npix));
  bytes += sizeof(int32_t) * (4 + Sz(nper)) + sizeof(RunEntry);
  return bytes;
}

SlotBuffers WorkspaceSet::Slots(const WorkspaceSpec& spec) const {
  SlotBuffers b{};
  b.m = m.get();
  b.x = x.get();
  b.fw = fw.get();
  b.t = t.get();
  b.c = c.get();
  b.fmodel = fmodel.get();
  b.pix = pix.get();
  b.model = model.get();
  b.status = status.get();
  b.mflags = mflags.get();
  b.info = info.get();
  b.eig_info = eig_info.get();
  b.cond = cond.get();
  b.ldiag = ldiag.get();
  b.t_stride = spec.t_stride();
  b.p_base = spec.p_base();
  b.p_band = spec.p_band;
  return b;
}

QlBuffers Workspace::ql() const {
  return QlBuffers{ql_d_.get(), ql_e_.get(), ql_d0_.get(), ql_e0_.get(),
                   ql_c_.get(), ql_s_.get(), ql_sweeps_.get()};
}

OutputBuffers WorkspaceSet::Outputs() const {
  return OutputBuffers{out_flux.get(), out_ivar.get(), out_rdiag.get(), out_pixmask.get(),
                       out_chi2.get()};
}

absl::Status Workspace::ReserveSet(WorkspaceSet* s, const WorkspaceSpec& spec) {
  const std::size_t slots = Sz(spec.slots), ld = Sz(spec.ld);
  const std::size_t blocks = slots * Sz(spec.nper);
  const std::size_t nt2 = Sz(int64_t{spec.nt} * spec.nt);
  const std::size_t out = Sz(int64_t{spec.bundles} * spec.bundlesize * spec.nwave);
  SPEXD_RETURN_IF_ERROR(s->m.Allocate(slots * ld * ld, "normal matrices"));
  SPEXD_RETURN_IF_ERROR(s->x.Allocate(slots * ld, "solutions"));
  SPEXD_RETURN_IF_ERROR(s->fw.Allocate(slots * ld, "fluxweights"));
  SPEXD_RETURN_IF_ERROR(s->fmodel.Allocate(slots * ld, "model fluxes"));
  SPEXD_RETURN_IF_ERROR(s->ldiag.Allocate(slots * ld, "factor diagonals"));
  SPEXD_RETURN_IF_ERROR(s->t.Allocate(slots * Sz(spec.t_stride()), "GEMM scratch"));
  SPEXD_RETURN_IF_ERROR(s->c.Allocate(blocks * nt2, "inverse diagonal blocks"));
  SPEXD_RETURN_IF_ERROR(s->pix.Allocate(2 * slots * Sz(spec.max_npix), "pixel chi2 and weights"));
  if (spec.canvas_stride > 0) {
    SPEXD_RETURN_IF_ERROR(s->model.Allocate(slots * Sz(spec.max_npix), "patch models"));
    const std::size_t cv = Sz(spec.bundles) * Sz(spec.canvas_stride);
    SPEXD_RETURN_IF_ERROR(s->canvas.Allocate(cv, "model canvases"));
    SPEXD_RETURN_IF_ERROR(s->h_canvas.Allocate(cv, "model canvases (host)"));
    SPEXD_RETURN_IF_ERROR(s->canvas_desc.Allocate(Sz(spec.bundles), "canvas layout"));
    SPEXD_RETURN_IF_ERROR(s->h_canvas_desc.Allocate(Sz(spec.bundles), "canvas layout (host)"));
  }
  // Canvas patch lists hold every patch of the batch (slots counts skipped ones too).
  SPEXD_RETURN_IF_ERROR(s->canvas_list.Allocate(std::max<std::size_t>(slots, 1), "canvas lists"));
  SPEXD_RETURN_IF_ERROR(s->h_canvas_list.Allocate(std::max<std::size_t>(slots, 1), "canvas lists (host)"));
  SPEXD_RETURN_IF_ERROR(s->status.Allocate(std::max<std::size_t>(slots, 1), "patch status"));
  SPEXD_RETURN_IF_ERROR(s->h_status.Allocate(std::max<std::size_t>(slots, 1), "patch status (host)"));
  SPEXD_RETURN_IF_ERROR(s->cond.Allocate(std::max<std::size_t>(slots, 1), "patch conditioning"));
  SPEXD_RETURN_IF_ERROR(s->h_cond.Allocate(std::max<std::size_t>(slots, 1), "patch conditioning (host)"));
  SPEXD_RETURN_IF_ERROR(s->mflags.Allocate(std::max<std::size_t>(slots, 1), "model flags"));
  SPEXD_RETURN_IF_ERROR(s->info.Allocate(std::max<std::size_t>(slots, 1), "factor info"));
  SPEXD_RETURN_IF_ERROR(s->eig_info.Allocate(std::max<std::size_t>(blocks, 1), "eigensolver info"));
  SPEXD_RETURN_IF_ERROR(s->ptrs.Allocate(std::max<std::size_t>(spec.ptr_count, 1), "pointer arrays"));
  SPEXD_RETURN_IF_ERROR(s->h_ptrs.Allocate(std::max<std::size_t>(spec.ptr_count, 1), "pointer arrays (host)"));
  SPEXD_RETURN_IF_ERROR(s->entries.Allocate(std::max<std::size_t>(slots, 1), "run entries"));
  SPEXD_RETURN_IF_ERROR(s->h_entries.Allocate(std::max<std::size_t>(slots, 1), "run entries (host)"));
  SPEXD_RETURN_IF_ERROR(s->out_flux.Allocate(out, "flux"));
  SPEXD_RETURN_IF_ERROR(s->out_ivar.Allocate(out, "ivar"));
  SPEXD_RETURN_IF_ERROR(s->out_pixmask.Allocate(out, "pixmask_fraction"));
  SPEXD_RETURN_IF_ERROR(s->out_chi2.Allocate(out, "chi2pix"));
  SPEXD_RETURN_IF_ERROR(s->out_rdiag.Allocate(out * Sz(spec.nk), "resolution"));
  if (spec.rdiags_words()) {
    SPEXD_RETURN_IF_ERROR(s->out_rdiag_words.Allocate(out * Sz(spec.nk), "resolution (float32)"));
    const std::size_t bundles = std::max<std::size_t>(Sz(spec.bundles), 1);
    SPEXD_RETURN_IF_ERROR(s->word_sums.Allocate(bundles, "resolution word sums"));
    SPEXD_RETURN_IF_ERROR(s->h_word_sums.Allocate(bundles, "resolution word sums (host)"));
  }
  SPEXD_RETURN_IF_ERROR(s->h_flux.Allocate(out, "flux (host)"));
  SPEXD_RETURN_IF_ERROR(s->h_ivar.Allocate(out, "ivar (host)"));
  SPEXD_RETURN_IF_ERROR(s->h_pixmask.Allocate(out, "pixmask_fraction (host)"));
  SPEXD_RETURN_IF_ERROR(s->h_chi2.Allocate(out, "chi2pix (host)"));
  if (spec.host_rdiag) {
    SPEXD_RETURN_IF_ERROR(s->h_rdiag.Allocate(out * Sz(spec.nk), "resolution (host)"));
  }
  if (!s->events_created) {
    SPEXD_RETURN_IF_ERROR(s->decorrelated.Create(false));
    SPEXD_RETURN_IF_ERROR(s->compute_done.Create(false));
    SPEXD_RETURN_IF_ERROR(s->normal_equations_done.Create(false));
    SPEXD_RETURN_IF_ERROR(s->outputs_copied.Create(false));
    for (Event& e : s->marks) SPEXD_RETURN_IF_ERROR(e.Create(true));
    SPEXD_RETURN_IF_ERROR(s->d2h_start.Create(true));
    SPEXD_RETURN_IF_ERROR(s->d2h_end.Create(true));
    s->events_created = true;
  }
  while (s->bundle_copied.size() < std::max<std::size_t>(Sz(spec.bundles), 1)) {
    SPEXD_RETURN_IF_ERROR(s->bundle_copied.emplace_back().Create(false));
  }
  return absl::OkStatus();
}

absl::Status Workspace::Reserve(const WorkspaceSpec& job) {
  WorkspaceSpec spec = job;
  spec.host_rdiag = !job.rdiags_words();
  const WorkspaceSpec& r = reserved_;
  const bool grows = spec.slots > r.slots || spec.ld > r.ld || spec.nt > r.nt ||
                     spec.nper > r.nper || spec.nb > r.nb || spec.max_npix > r.max_npix ||
                     spec.bundles > r.bundles || spec.bundlesize * spec.nwave > r.bundlesize * r.nwave ||
                     spec.nk > r.nk || spec.canvas_stride > r.canvas_stride ||
                     spec.ptr_count > r.ptr_count || spec.image_pixels > r.image_pixels ||
                     (spec.ql_log && !r.ql_log) ||
                     (spec.ql_rotations && !r.ql_rotations) ||
                     (spec.rdiags_words() && !r.rdiags_words()) ||
                     (spec.host_rdiag && !r.host_rdiag);
  if (!grows) return absl::OkStatus();
  if (r.slots > 0) ++reallocations_;
  // Grow to the element-wise maximum so that alternating geometries settle.
  WorkspaceSpec g = spec;
  g.slots = std::max(spec.slots, r.slots);
  g.ld = std::max(spec.ld, r.ld);
  g.nt = std::max(spec.nt, r.nt);
  g.nper = std::max(spec.nper, r.nper);
  g.nb = std::max(spec.nb, r.nb);
  g.max_npix = std::max(spec.max_npix, r.max_npix);
  g.bundles = std::max(spec.bundles, r.bundles);
  g.nk = std::max(spec.nk, r.nk);
  g.canvas_stride = std::max(spec.canvas_stride, r.canvas_stride);
  g.ptr_count = std::max(spec.ptr_count, r.ptr_count);
  g.image_pixels = std::max(spec.image_pixels, r.image_pixels);
  g.ql_log = spec.ql_log || r.ql_log;
  g.ql_rotations = g.ql_log && (spec.ql_rotations || r.ql_rotations);
  // Either set's words buffer serves both byte orders: only whether there is one counts.
  if (!spec.rdiags_words()) g.rdiags_form = r.rdiags_form;
  g.host_rdiag = spec.host_rdiag || r.host_rdiag;
  if (int64_t{r.bundlesize} * r.nwave > int64_t{g.bundlesize} * g.nwave) {
    g.bundlesize = r.bundlesize;
    g.nwave = r.nwave;
  }
  for (WorkspaceSet& s : sets_) SPEXD_RETURN_IF_ERROR(ReserveSet(&s, g));
  SPEXD_RETURN_IF_ERROR(image_.Allocate(g.image_pixels, "image"));
  SPEXD_RETURN_IF_ERROR(ivar_.Allocate(g.image_pixels, "ivar"));
  SPEXD_RETURN_IF_ERROR(stage_.Allocate(2 * g.image_pixels, "image staging"));
  SPEXD_RETURN_IF_ERROR(mask_stage_.Allocate(g.image_pixels, "mask staging"));
  SPEXD_RETURN_IF_ERROR(rule_counts_.Allocate(2, "pixel rule counts"));
  const std::size_t ql_blocks = std::max<std::size_t>(Sz(int64_t{g.slots} * g.nper), 1);
  if (g.ql_log) {
    const std::size_t n = ql_blocks * Sz(g.nt);
    SPEXD_RETURN_IF_ERROR(ql_d_.Allocate(n, "QL diagonals"));
    SPEXD_RETURN_IF_ERROR(ql_e_.Allocate(n, "QL subdiagonals"));
    SPEXD_RETURN_IF_ERROR(ql_d0_.Allocate(n, "tridiagonal diagonals"));
    SPEXD_RETURN_IF_ERROR(ql_e0_.Allocate(n, "tridiagonal subdiagonals"));
  }
  if (g.ql_rotations) {  // the rotate path's log; the twisted path never writes it
    const std::size_t rot = ql_blocks * Sz(QlRotationCap(g.nt));
    SPEXD_RETURN_IF_ERROR(ql_c_.Allocate(rot, "QL rotation cosines"));
    SPEXD_RETURN_IF_ERROR(ql_s_.Allocate(rot, "QL rotation sines"));
    SPEXD_RETURN_IF_ERROR(ql_sweeps_.Allocate(ql_blocks * 2 * Sz(QlSweepCap(g.nt)), "QL sweep ranges"));
  }
  SPEXD_RETURN_IF_ERROR(h_stage_.Allocate(2 * g.image_pixels, "image staging (host)"));
  SPEXD_RETURN_IF_ERROR(h_rule_counts_.Allocate(2, "pixel rule counts (host)"));
  if (!events_created_) {
    SPEXD_RETURN_IF_ERROR(upload_start_.Create(true));
    SPEXD_RETURN_IF_ERROR(upload_end_.Create(true));
    SPEXD_RETURN_IF_ERROR(first_columns_.Create(false));
    SPEXD_RETURN_IF_ERROR(reduced_.Create(false));
    SPEXD_RETURN_IF_ERROR(ql_free_.Create(false));
    SPEXD_RETURN_IF_ERROR(factored_.Create(false));
    events_created_ = true;
  }
  reserved_ = g;
  return absl::OkStatus();
}

std::size_t Workspace::device_bytes() const {
  // Every device buffer (Backend::Memory reports this; BatchExtractor::Prepare counts it
  // as available when it sizes a batch).
  std::size_t b = image_.bytes() + ivar_.bytes() + stage_.bytes() + mask_stage_.bytes() +
                  rule_counts_.bytes();
  b += ql_d_.bytes() + ql_e_.bytes() + ql_d0_.bytes() + ql_e0_.bytes() + ql_c_.bytes() +
       ql_s_.bytes() + ql_sweeps_.bytes();
  for (const WorkspaceSet& s : sets_) {
    b += s.m.bytes() + s.x.bytes() + s.fw.bytes() + s.t.bytes() + s.c.bytes() +
         s.fmodel.bytes() + s.ldiag.bytes() + s.pix.bytes() + s.model.bytes();
    b += s.status.bytes() + s.cond.bytes() + s.mflags.bytes() + s.info.bytes() + s.eig_info.bytes() +
         s.ptrs.bytes() + s.entries.bytes();
    b += s.out_flux.bytes() + s.out_ivar.bytes() + s.out_rdiag.bytes() + s.out_rdiag_words.bytes() +
         s.out_pixmask.bytes() +
         s.out_chi2.bytes() + s.canvas.bytes() + s.canvas_desc.bytes() + s.canvas_list.bytes();
  }
  return b;
}

}  // namespace spexd::cuda
