"""desispec's conventions for what an extraction writes beside the numbers (the same as
core/frame/desi_conventions.cc): shortened input paths, desiutil's environment
provenance, and the FLAVOR/CAMERA keys desispec's write_frame needs."""
import os
import warnings

# desiutil.depend.add_dependencies records these, with "NOT_SET" when unset.
DESI_ENVIRONMENT = ("DESI_ROOT", "DESI_SPECTRO_DATA", "DESI_SPECTRO_REDUX", "SPECPROD",
                    "DESI_SPECTRO_CALIB", "DESI_BASIS_TEMPLATES", "DESI_TARGET", "DESIMODEL")


class FrameKeysWarning(UserWarning):
    """The frame header lacks a key desispec needs downstream (FLAVOR, CAMERA)."""


def environment_dependencies():
    return [(name, os.environ.get(name, "NOT_SET")) for name in DESI_ENVIRONMENT]


def _specprod_root(readonly):
    prod = os.environ.get("SPECPROD")
    if prod is None:
        return None
    if "/" not in prod:
        if "DESI_SPECTRO_REDUX" in os.environ:
            prod = os.path.join(os.environ["DESI_SPECTRO_REDUX"], prod)
        elif "DESI_ROOT" in os.environ:
            prod = os.path.join(os.environ["DESI_ROOT"], "spectro", "redux", prod)
        else:
            return None
    if readonly:
        root, ro = os.environ.get("DESI_ROOT"), os.environ.get("DESI_ROOT_READONLY")
        if root and ro and root != ro and prod.startswith(root):
            prod = ro + prod[len(root):]
    return prod


def shorten_path(path):
    """desispec.io.meta.shorten_filename: $DESI_SPECTRO_CALIB -> SPCALIB, the production
    ($DESI_SPECTRO_REDUX/$SPECPROD, or its read-only twin) -> SPECPROD."""
    if not path:
        return path
    calib = os.environ.get("DESI_SPECTRO_CALIB")
    if calib is not None and path.startswith(calib):
        return "SPCALIB" + path[len(calib):]
    for readonly in (False, True):
        prod = _specprod_root(readonly)
        if prod is not None and path.startswith(prod):
            return "SPECPROD" + path[len(prod):]
    return path


def missing_frame_keys(keys):
    """The keys among FLAVOR and CAMERA that `keys` (a header or card keywords) lacks."""
    return [k for k in ("FLAVOR", "CAMERA") if k not in keys]


def warn_missing_frame_keys(keys, where):
    missing = missing_frame_keys(keys)
    if missing:
        warnings.warn(
            f"{where}: the frame header has no {' or '.join(missing)}; desispec's write_frame "
            "refuses such a frame ('Frame did not pass simple vetting test'). Pass header= "
            "with them, or flavor=/camera= to Client.extract.", FrameKeysWarning, stacklevel=3)
    return missing
