"""Drawing an SVG page with PNG images in it, with numpy and the standard library only:
indexed PNGs (`png_indexed`), colour maps as palettes, the page's elements (`Svg`),
plot panels with ticks and labels (`Axes`) and colour bars. spexd.qa draws its page with
them.
"""
import base64
import os
import struct
import zlib
from xml.sax.saxutils import escape

import numpy as np

BLACK, GREY, LIGHT, RED = (0, 0, 0), (128, 128, 128), (235, 235, 235), (220, 0, 0)
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
# A colour map becomes a palette of this many colours over [0, 1], plus light grey for NaN
# (entry LEVELS): one byte per pixel, steps too fine to see on noisy images, and a noise
# image deflates to ~7 bits per pixel (255 colours: ~8).
LEVELS = 128


def png_indexed(indices, palette):
    """A PNG file (bytes) of an image of palette indices (uint8 [rows][columns], row 0 at
    the top) and its palette (RGB triples, at most 256)."""
    # Written with zlib and struct, not an imaging library (Pillow pulls ~24 Debian packages
    # into the demo): a PNG is its signature and four chunks (IHDR, PLTE, IDAT, IEND), each
    # length, type, data and CRC-32, with the image as one zlib stream of filtered rows.
    indices = np.asarray(indices)
    if indices.ndim != 2 or 0 in indices.shape:
        raise ValueError(f"png_indexed: an image of shape {indices.shape}")
    if not 0 < len(palette) <= 256 or indices.max() >= len(palette):
        raise ValueError(f"png_indexed: {len(palette)} palette entries for index "
                         f"{int(indices.max())}")
    height, width = indices.shape
    rows = np.zeros((height, width + 1), np.uint8)  # each row: filter type 0 (none), pixels
    rows[:, 1:] = indices

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    # IHDR: width, height, bit depth 8, colour type 3 (palette), deflate, filters of
    # method 0, no interlace.
    header = struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def hex_colour(rgb):
    return "#%02x%02x%02x" % tuple(int(c) for c in rgb)


def tick_values(lo, hi, n=5):
    """About n round tick values in [lo, hi]."""
    if not np.isfinite(lo) or not np.isfinite(hi) or hi <= lo:
        return [lo] if np.isfinite(lo) else []
    raw = (hi - lo) / n
    mag = 10 ** np.floor(np.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = np.ceil(lo / step) * step
    return [float(v) + 0.0 for v in np.arange(first, hi + step * 1e-9, step)]  # no -0


def tick_label(v):
    return f"{v:.6g}"


def map_palette(anchors):
    """The LEVELS colours of a colour map over [0, 1], then light grey (NaN)."""
    pos, v = np.linspace(0, 1, len(anchors)), np.linspace(0, 1, LEVELS)
    rgb = np.stack([np.interp(v, pos, [a[c] for a in anchors]) for c in range(3)], axis=-1)
    return [tuple(int(c) for c in row) for row in np.rint(rgb)] + [LIGHT]


def map_indices(values):
    """Palette indices (map_palette) of values in [0, 1]: clipped; not finite: NaN's grey."""
    v = np.clip(np.nan_to_num(values, nan=0.0), 0, 1)
    out = np.rint(v * (LEVELS - 1)).astype(np.uint8)
    out[~np.isfinite(values)] = LEVELS
    return out


def block_factors(shape, limit):
    """Block size (rows, columns) that brings an image of shape within limit x limit."""
    return tuple(max(-(-n // limit), 1) for n in shape)


def blocks(a, factors, reduce, fill):
    """a reduced over blocks of factors (rows, columns) by reduce(..., axis=(1, 3)); the
    last blocks, where the shape is not a multiple, are padded with fill."""
    fy, fx = factors
    if fy == fx == 1:
        return a
    h, w = a.shape
    ny, nx = -(-h // fy), -(-w // fx)
    padded = np.full((ny * fy, nx * fx), fill, a.dtype)
    padded[:h, :w] = a
    return reduce(padded.reshape(ny, fy, nx, fx), axis=(1, 3))


def runs(good):
    """(start, stop) of each run of True in a 1-d boolean array."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], good.astype(np.int8), [0]))))
    return list(zip(edges[::2], edges[1::2]))


class Svg:
    """The page's SVG elements in drawing order, written out as one file."""

    _ANCHOR = {"l": "start", "m": "middle", "r": "end"}
    # Vertical anchor (top, middle, bottom of the letters) as a shift of the baseline in em:
    # dy rather than dominant-baseline, which some SVG viewers ignore.
    _DY = {"t": "0.8em", "m": "0.35em", "d": "-0.2em"}

    def __init__(self, width, height):
        self.width, self.height = width, height
        self.parts = []
        self.count = 0

    def new_id(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def add(self, element):
        self.parts.append(element)

    def text(self, x, y, text, fill=BLACK, size=11, anchor="lt", vertical=False):
        """text at (x, y) with anchor horizontal l/m/r + vertical t/m/d; vertical: turned
        90 degrees counter-clockwise about (x, y) (a y-axis label)."""
        turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if vertical else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" dy="{self._DY[anchor[1]]}" '
                 f'font-size="{size}" fill="{hex_colour(fill)}" '
                 f'text-anchor="{self._ANCHOR[anchor[0]]}"{turn}>{escape(text)}</text>')

    def path(self, d, stroke, width=1, extra=""):
        if d:
            self.add(f'<path d="{d}" fill="none" stroke="{hex_colour(stroke)}" '
                     f'stroke-width="{width}"{extra}/>')

    def rect(self, box, fill=None, stroke=None):
        x0, y0, x1, y1 = box
        self.add(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" '
                 f'height="{y1 - y0:.1f}" fill="{hex_colour(fill) if fill else "none"}"'
                 + (f' stroke="{hex_colour(stroke)}"' if stroke else "") + "/>")

    def image(self, box, png):
        """A PNG stretched over box, each image pixel a sharp rectangle (not smoothed)."""
        x0, y0, x1, y1 = box
        data = base64.b64encode(png).decode("ascii")
        self.add(f'<image x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" '
                 f'height="{y1 - y0:.1f}" preserveAspectRatio="none" '
                 f'style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>')

    def write(self, path):
        """Writes the page to path atomically (a temporary file in the same directory,
        then a rename)."""
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                        f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
                        f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
                        f'font-family="{FONT}">\n'
                        '<rect width="100%" height="100%" fill="#ffffff"/>\n')
                for part in self.parts:
                    f.write(part)
                    f.write("\n")
                f.write("</svg>\n")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


class Axes:
    """A panel: a box on the page with data limits, ticks, labels and a title."""

    def __init__(self, svg, box, xlim, ylim, title, xlabel, ylabel):
        self.svg = svg
        self.x0, self.y0, self.x1, self.y1 = box
        self.xlim, self.ylim = xlim, ylim
        mid = (self.x0 + self.x1) / 2
        svg.text(mid, self.y0 - 6, title, size=13, anchor="md")
        svg.text(mid, self.y1 + 22, xlabel, anchor="mt")
        svg.text(self.x0 - 50, (self.y0 + self.y1) / 2, ylabel, anchor="mm", vertical=True)
        ticks = []
        for v in tick_values(*xlim):
            x = float(self.px(v, ylim[0])[0])
            ticks.append(f"M{x:.1f} {self.y1:.1f}v4")
            svg.text(x, self.y1 + 6, tick_label(v), anchor="mt")
        for v in tick_values(*ylim):
            y = float(self.px(xlim[0], v)[1])
            ticks.append(f"M{self.x0 - 4:.1f} {y:.1f}h4")
            svg.text(self.x0 - 6, y, tick_label(v), anchor="rm")
        svg.path("".join(ticks), BLACK)
        self.clip = svg.new_id("clip")
        svg.add(f'<clipPath id="{self.clip}"><rect x="{self.x0:.1f}" y="{self.y0:.1f}" '
                f'width="{self.x1 - self.x0:.1f}" height="{self.y1 - self.y0:.1f}"/>'
                "</clipPath>")

    def frame(self):
        self.svg.rect((self.x0, self.y0, self.x1, self.y1), stroke=BLACK)

    def px(self, x, y):
        """Page position of data (x, y) (arrays allowed)."""
        (a, b), (c, d) = self.xlim, self.ylim
        sx = self.x0 + (np.asarray(x, float) - a) / ((b - a) or 1) * (self.x1 - self.x0)
        sy = self.y1 - (np.asarray(y, float) - c) / ((d - c) or 1) * (self.y1 - self.y0)
        return sx, sy

    def begin_clip(self):
        """What follows, up to end_clip, is cut at the panel's box."""
        self.svg.add(f'<g clip-path="url(#{self.clip})">')

    def end_clip(self):
        self.svg.add("</g>")

    def image(self, indices, palette):
        """An image of palette indices (row 0 at the bottom) over the whole panel."""
        self.svg.image((self.x0, self.y0, self.x1, self.y1),
                       png_indexed(indices[::-1], palette))

    def note(self, text, line=1):
        """A grey line above the title (line 1, then 2 above it)."""
        self.svg.text((self.x0 + self.x1) / 2, self.y0 - 10 - 14 * line, text, fill=GREY,
                      anchor="md")


def colour_bar(svg, box, colours, labels, size=11, bands=False):
    """A vertical bar at box, colours from the bottom up: a gradient through them (a colour
    map's anchors) or, with bands, one equal band each (the mask classes); labels
    [(fraction 0..1 from the bottom, text)]."""
    x0, y0, x1, y1 = box
    if bands:
        step = (y1 - y0) / len(colours)
        for k, colour in enumerate(colours):
            svg.rect((x0, y1 - (k + 1) * step, x1, y1 - k * step), fill=colour)
    else:
        gradient = svg.new_id("bar")
        stops = "".join(f'<stop offset="{k / (len(colours) - 1):.4f}" '
                        f'stop-color="{hex_colour(c)}"/>' for k, c in enumerate(colours))
        svg.add(f'<linearGradient id="{gradient}" x1="0" y1="1" x2="0" y2="0">{stops}'
                "</linearGradient>")
        svg.add(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" '
                f'height="{y1 - y0:.1f}" fill="url(#{gradient})"/>')
    svg.rect(box, stroke=BLACK)
    ticks = []
    for f, text in labels:
        y = y1 - f * (y1 - y0)
        ticks.append(f"M{x1:.1f} {y:.1f}h3")
        svg.text(x1 + 5, y, text, size=size, anchor="lm")
    svg.path("".join(ticks), BLACK)
