"""Streamed bundles and the extraction result built from them.

The server streams float64 arrays; they are kept as float64 numpy arrays, so a result
equals a local extraction (`spexctl extract --local`) bit for bit. With
wire_precision="float32" the arrays arrive rounded to float32 (as the frame file holds
them). Either way the desispec specmask and the RAW scores come from the server, which
computes them with core from its float64 frame (FrameProducts, asked for by
ExtractHeader.want_frame_products), so the package computes neither again and the
written file is spexctl's.
"""
import dataclasses

import numpy as np

from spexd.errors import DataLoss

# desispec.maskbits.specmask bits set by extraction (extraction-spec §2.13).
SOMEBADPIX = 1 << 0
ALLBADPIX = 1 << 1
BAD2DFIT = 1 << 7


@dataclasses.dataclass
class Bundle:
    """One bundle as streamed: fibres [fiber_begin, fiber_begin + nfibers)."""

    bundle: int
    fiber_begin: int
    nfibers: int
    flux: np.ndarray              # [nfibers, nwave] photons/Angstrom, float64
    ivar: np.ndarray              # [nfibers, nwave]
    resolution_data: np.ndarray   # [nfibers, 2*ndiag+1, nwave]
    chi2pix: np.ndarray           # [nfibers, nwave]
    pixmask_fraction: np.ndarray  # [nfibers, nwave] (None in a float32 stream)
    failed_bins: np.ndarray       # [nfibers, nwave] bool: the patch failed (BAD2DFIT); None
                                  # in a float32 stream
    counts: object                # spexd.v1.PatchCounts
    seconds: float                # wall time of the bundle on the worker


class StreamAssembler:
    """Turns ExtractResponse messages into FrameHeader, complete Bundles, model, summary.

    Checks the protocol as spexctl does (client/spexctl/remote_frame.cc): parts in order,
    array sizes consistent with the header, every announced bundle exactly once.
    """

    def __init__(self, file_only=False):
        self.header = None
        self.nwave = 0              # the grid's length: len(header.wave)
        self.summary = None
        self.file_only = file_only  # results_to_file_only: parts carry no arrays
        self.float32 = None         # set by the first part with arrays
        self.mask = None            # the server's specmask and scores (FrameProducts)
        self.scores = None
        self._mask_parts = []
        self._mask_rows = 0
        self.bundles_done = 0
        self._parts = []
        self._next_fiber = None
        self._model = None
        self._model_received = 0

    def feed(self, resp):
        """Consumes one ExtractResponse; returns a Bundle when one is complete."""
        kind = resp.WhichOneof("kind")
        if kind == "header":
            if self.header is not None:
                raise DataLoss("second FrameHeader in one stream")
            h = resp.header
            if not h.wave or h.ndiag < 0:
                raise DataLoss("FrameHeader without a wavelength grid or with negative ndiag")
            self.header = h
            self.nwave = len(h.wave)
        elif kind == "bundle":
            return self._on_part(resp.bundle)
        elif kind == "model":
            self._on_model(resp.model)
        elif kind == "summary":
            self.summary = resp.summary
        elif kind == "products":
            self._on_products(resp.products)
        return None  # a newer server's message kind: ignored

    def _on_part(self, p):
        h = self.header
        if h is None:
            raise DataLoss("BundleData before the FrameHeader")
        if not self._parts:
            if self.bundles_done >= len(h.bundles) or p.bundle != h.bundles[self.bundles_done]:
                raise DataLoss(f"unexpected bundle {p.bundle}")
            self._next_fiber = h.specmin + p.bundle * h.bundlesize
        elif p.bundle != self._parts[0].bundle:
            raise DataLoss("bundle parts out of order")
        n = p.nfibers * self.nwave
        nk = 2 * h.ndiag + 1
        f32 = bool(p.flux_f32 or p.resolution_f32)
        if self.file_only:
            ok = not (p.flux or f32)
        elif f32:
            ok = (len(p.flux_f32) == 4 * n and len(p.ivar_f32) == 4 * n
                  and len(p.chi2pix_f32) == 4 * n and len(p.resolution_f32) == 4 * n * nk
                  and not p.flux and not p.pixmask_fraction)
        else:
            ok = (len(p.flux) == n and len(p.ivar) == n and len(p.chi2pix) == n
                  and len(p.pixmask_fraction) == n and len(p.resolution) == n * nk
                  and len(p.failed_bins) in (0, n))
        if n and not self.file_only:
            if self.float32 is not None and self.float32 != f32:
                raise DataLoss("float32 and float64 parts in one stream")
            self.float32 = f32
        if p.fiber_begin != self._next_fiber or not ok:
            raise DataLoss(f"malformed part of bundle {p.bundle}")
        self._next_fiber += p.nfibers
        self._parts.append(p)
        if not p.last_part:
            return None
        parts, self._parts = self._parts, []
        self.bundles_done += 1
        return None if self.file_only else self._join(parts)

    def _join(self, parts):
        h = self.header
        nw, nk = self.nwave, 2 * h.ndiag + 1
        nf = sum(p.nfibers for p in parts)

        f32 = bool(self.float32)

        def cat(field, shape):
            if f32:  # little-endian float32 bytes, kept float32 (what the file holds)
                return np.concatenate([np.frombuffer(getattr(p, field + "_f32"), dtype="<f4")
                                       for p in parts]).astype(np.float32).reshape(shape)
            return np.concatenate([np.asarray(getattr(p, field), dtype=np.float64)
                                   for p in parts]).reshape(shape)

        if f32:
            failed = pixmask = None
        else:
            failed = np.concatenate([
                np.frombuffer(p.failed_bins, dtype=np.uint8) if len(p.failed_bins)
                else np.zeros(p.nfibers * nw, dtype=np.uint8)
                for p in parts]).reshape(nf, nw).astype(bool)
            pixmask = cat("pixmask_fraction", (nf, nw))
        last = parts[-1]
        return Bundle(bundle=last.bundle, fiber_begin=parts[0].fiber_begin, nfibers=nf,
                      flux=cat("flux", (nf, nw)), ivar=cat("ivar", (nf, nw)),
                      resolution_data=cat("resolution", (nf, nk, nw)),
                      chi2pix=cat("chi2pix", (nf, nw)),
                      pixmask_fraction=pixmask, failed_bins=failed, counts=last.counts,
                      seconds=last.seconds)

    def _on_model(self, c):
        h = self.header
        if h is None:
            raise DataLoss("ModelChunk before the FrameHeader")
        expected = h.image_height * h.image_width * 8
        if (c.total_bytes != expected or c.offset != self._model_received
                or c.offset + len(c.data) > expected or len(c.data) % 8):
            raise DataLoss("malformed model chunk")
        if self._model is None:
            self._model = bytearray(expected)
        self._model[c.offset:c.offset + len(c.data)] = c.data
        self._model_received += len(c.data)

    def _on_products(self, p):
        h = self.header
        if h is None or self._parts:
            raise DataLoss("FrameProducts before the last bundle")
        first = not self._mask_parts
        if (p.nrows < 0 or len(p.mask) != p.nrows * self.nwave or (p.scores and not first)
                or p.row_begin != self._mask_rows):
            raise DataLoss("malformed FrameProducts part")
        if first:
            self.scores = ({c.name: np.array(c.values, dtype=np.float64) for c in p.scores},
                           {c.name: c.comment for c in p.scores})
        self._mask_parts.append(np.array(p.mask, dtype=np.uint32).reshape(p.nrows, self.nwave))
        self._mask_rows += p.nrows

    def finish(self):
        """Checks completeness; returns the model image [H, W] (float64) or None."""
        if self.header is None:
            raise DataLoss("no FrameHeader received")
        if self.summary is None:
            raise DataLoss("the server ended the stream without a summary")
        if self.bundles_done != len(self.header.bundles) or self._parts:
            raise DataLoss(f"received {self.bundles_done} of {len(self.header.bundles)} "
                           "bundles")
        if not self.file_only:
            if not self._mask_parts:
                raise DataLoss("stream without the server's mask (FrameProducts)")
            self.mask = np.concatenate(self._mask_parts)
        if self._model is None:
            return None
        if self._model_received != len(self._model):
            raise DataLoss("model image incomplete")
        return np.frombuffer(bytes(self._model), dtype="<f8").reshape(
            self.header.image_height, self.header.image_width)


# The FrameQa fields (spexd.v1), in the order spexctl and spexd.qa show them.
QA_FIELDS = ("request_id", "worst_condition", "worst_condition_bundle", "retried_patches",
             "failed_patches", "bins", "somebadpix_bins", "allbadpix_bins", "bad2dfit_bins",
             "median_chi2pix", "shadow_parity", "shadow_bundle")


class ExtractionResult:
    """A whole extraction: numpy arrays in desispec's layout plus the server's summary.

    flux, ivar, chi2pix, pixmask_fraction: [nspec, nwave] float64 (float32 from a float32
    stream, which has no pixmask_fraction or failed_bins: None); mask: uint32
    specmask (the server's); wave: [nwave]; resolution_data: [nspec, 2*ndiag+1, nwave]; fibers: the
    absolute fibre of each row; model: [H, W] when want_model; header / summary: the
    FrameHeader and ExtractSummary messages; fibermap: astropy Table of the frame's
    fibres (None when the input had no FIBERMAP).
    """

    def __init__(self, header, bundles, summary, model, in_psf, in_img, server_mask,
                 server_scores, want_scores=True):
        self.header = header
        self.summary = summary
        self.model = model
        self.in_psf = in_psf
        self.in_img = in_img
        self.wave = np.array(header.wave, dtype=np.float64)
        nw, nk = len(self.wave), 2 * header.ndiag + 1
        if bundles:
            self.fibers = np.concatenate([np.arange(b.fiber_begin, b.fiber_begin + b.nfibers)
                                          for b in bundles])
        else:
            self.fibers = np.zeros(0, dtype=np.int64)

        def cat(field, shape):
            return (np.concatenate([getattr(b, field) for b in bundles]) if bundles
                    else np.zeros(shape))

        self.flux = cat("flux", (0, nw))
        self.ivar = cat("ivar", (0, nw))
        self.resolution_data = cat("resolution_data", (0, nk, nw))
        self.chi2pix = cat("chi2pix", (0, nw))
        # server_mask / server_scores: FrameProducts, made by the server from the float64
        # values (core::ComputeSpecMask and core::RawScores).
        self._server_scores = server_scores
        self.mask = np.asarray(server_mask, dtype=np.uint32).reshape(-1, nw)
        if len(self.mask) != len(self.flux):
            raise DataLoss("the server's mask does not match the bundles")
        if self.flux.dtype == np.float32:  # a float32 stream: neither array is sent
            self.pixmask_fraction = self.failed_bins = None
        else:
            self.pixmask_fraction = cat("pixmask_fraction", (0, nw))
            self.failed_bins = cat("failed_bins", (0, nw)).astype(bool)
        self._fibermap = None
        self.want_scores = want_scores  # False: no SCORES HDU (no_scores=True)
        self.heliocor = header.heliocor if header.heliocor not in (0.0, 1.0) else None

    @property
    def qa(self):
        """The server's numerical-health summary of the frame, a dict:
        worst_condition (and its bundle), retried and failed patches, bins and the
        SOMEBADPIX / ALLBADPIX / BAD2DFIT counts, median_chi2pix, shadow_parity ("" when
        not sampled, "queued" or "skipped") with shadow_bundle, and request_id. Empty
        when the server sent none (an older server)."""
        if self.summary is None or not self.summary.HasField("qa"):
            return {}
        q = self.summary.qa
        return {name: getattr(q, name) for name in QA_FIELDS}

    @property
    def specmin(self):
        return int(self.fibers[0]) if len(self.fibers) else int(self.header.specmin)

    @property
    def nspec(self):
        return len(self.fibers)

    @property
    def image_header(self):
        """The input's IMAGE header cards (80-character strings)."""
        return list(self.header.image_header)

    @property
    def fibermap(self):
        if self._fibermap is None and self.header.fibermap_fits:
            from spexd.frame_file import fibermap_rows
            self._fibermap = fibermap_rows(bytes(self.header.fibermap_fits), self.fibers)
        return self._fibermap

    @property
    def scores(self):
        """desispec's RAW scores, the server's (core::RawScores): (dict, comments); both
        empty without a SCORES HDU (no_scores, or no bin in the camera's band)."""
        return self._server_scores

    def median_snr(self):
        """Median of flux * sqrt(ivar) over the bins with ivar > 0, per fibre."""
        out = np.zeros(self.nspec)
        for i in range(self.nspec):
            good = self.ivar[i] > 0
            out[i] = np.median(self.flux[i, good] * np.sqrt(self.ivar[i, good])) \
                if good.any() else 0.0
        return out

    def to_desispec(self):
        """A desispec.frame.Frame (no file). Raises DesispecUnavailable without desispec."""
        from spexd.frame_file import to_desispec
        return to_desispec(self)

    def write(self, path, model_path=None, qa_keywords=False):
        """Writes the desispec frame file (as spexctl does; .gz compresses), atomically.
        qa_keywords=True adds the server's QA (self.qa) as SPX* keys of the FLUX header,
        which `python3 -m spexd.qa FRAME` shows; desispec has no such keys, so they are
        off by default (the file stays desi_extract_spectra's, key for key)."""
        from spexd.frame_file import write_frame, write_model
        write_frame(self, path, qa_keywords=qa_keywords)
        if model_path is not None:
            write_model(self, model_path)
        return path
