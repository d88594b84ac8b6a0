"""coil.explain(fn, *args)'s page (python/coil/explain_page.py) viewed in a real browser:
headless Chromium renders the page written for a function of two kernels.

test_explain_page.py checks the page's HTML text; this checks what a browser makes of it. The DOM
Chromium dumps after loading the page (--dump-dom) must hold the page's title and heading and,
in the kernel table, every kernel coil.compiled_graphs() reports for the function; a screenshot
(--screenshot) at a fixed window size must be a PNG of that width with dark text on the light
background, not a blank or one-colour image. The PNG is read with Pillow when it is installed,
else by the small decoder below (zlib and struct).

Chromium comes from scripts/install_deps.sh (Debian's package `chromium`); the module is skipped
only where no chromium binary is found (COIL_CHROMIUM names one explicitly).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser

import pytest
import torch
from conftest import requires_coil

CHROMIUM = os.environ.get("COIL_CHROMIUM") or next(
    filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium binary on PATH (scripts/install_deps.sh installs Debian's `chromium`)",
)

WIDTH, HEIGHT = 1280, 2000  # the screenshot's window size


def softmax_then_colsum(x):
    return torch.softmax(x, dim=-1).sum(dim=0)  # two kernels: the softmax, then a column sum


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """(path of the page, kernel names coil reports for softmax_then_colsum), read before the
    per-test reset (conftest's _fresh_compiler_state) forgets coil's records."""
    coil = requires_coil()
    coil.reset()
    torch._dynamo.reset()
    out = tmp_path_factory.mktemp("explain")
    path = coil.explain(softmax_then_colsum, torch.randn(16, 32), out=str(out), repeats=2)
    records = coil.compiled_graphs()
    assert records and not any(r.eager_fallback for r in records)
    kernels = [k for r in records for k in r.kernel_names]
    assert len(kernels) >= 2, kernels
    return path, kernels


def _chromium(tmp_path, *args) -> subprocess.CompletedProcess:
    """Headless Chromium run as root (CI) with a fresh profile under tmp_path; fails with its
    stderr when it times out or exits non-zero."""
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", *args]
    env = dict(os.environ, XDG_CONFIG_HOME=str(profile), XDG_CACHE_HOME=str(profile))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{cmd} ran past 60 s; stderr:\n{e.stderr}")
    assert done.returncode == 0, f"{cmd} exited {done.returncode}; stderr:\n{done.stderr}"
    return done


class _Dom(HTMLParser):
    """The rendered DOM's title, h1 and the text of the kernel table's <td><code> cells."""

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.title = self.h1 = ""
        self.kernel_cells: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "code" and self.stack[-1:] == ["td"]:
            self.kernel_cells.append("")
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.stack:
            del self.stack[len(self.stack) - 1 - self.stack[::-1].index(tag):]

    def handle_data(self, data):
        top = self.stack[-1:]
        if top == ["title"]:
            self.title += data
        elif top == ["h1"]:
            self.h1 += data
        elif top == ["code"] and self.stack[-2:-1] == ["td"]:
            self.kernel_cells[-1] += data


def test_rendered_dom_names_every_kernel(page, tmp_path):
    path, kernels = page
    dom = _Dom()
    dom.feed(_chromium(tmp_path, "--dump-dom", f"file://{path}").stdout)
    assert dom.title == dom.h1 == "coil: softmax_then_colsum", (dom.title, dom.h1)
    missing = [k for k in kernels if k not in dom.kernel_cells]
    assert not missing, f"kernels {missing} not in the rendered table {dom.kernel_cells}"


def _png_pixels(path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of 8-bit RGB bytes) of the PNG at path."""
    try:
        from PIL import Image
    except ImportError:
        return _decode_png(open(path, "rb").read())
    with Image.open(path) as image:
        rgb = image.convert("RGB")
        data, (width, height) = rgb.tobytes(), rgb.size
    return width, height, [data[y * width * 3:(y + 1) * width * 3] for y in range(height)]


def _decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """A non-interlaced 8-bit grey/RGB(A) PNG (what Chromium writes) without Pillow."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (0, 2, 4, 6), header
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    prev, rows = bytearray(stride), []
    for y in range(height):
        start = y * (stride + 1)
        filter_type, cur = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride) if filter_type else ():
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            if filter_type == 1:
                pred = a
            elif filter_type == 2:
                pred = b
            elif filter_type == 3:
                pred = (a + b) >> 1
            else:  # 4: Paeth
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[i] = (cur[i] + pred) & 0xFF
        prev = cur
        if color in (0, 4):  # grey (+ alpha): repeat the grey value as R, G, B
            rows.append(bytes(v for g in cur[::bpp] for v in (g, g, g)))
        else:
            rows.append(bytes(v for x in range(0, stride, bpp) for v in cur[x:x + 3]))
    return width, height, rows


def test_screenshot_shows_dark_text_on_light_background(page, tmp_path):
    path, _ = page
    shot = tmp_path / "page.png"
    _chromium(tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
              f"file://{path}")
    assert shot.exists() and shot.stat().st_size > 0, "Chromium wrote no screenshot"
    width, height, rows = _png_pixels(shot)
    assert width == WIDTH, (width, height)
    colours = {row[x:x + 3] for row in rows[::8] for x in range(0, 3 * width, 3 * 8)}
    assert len(colours) > 2, f"one-colour screenshot: {colours}"
    dark, light, heading = 0, 0, 0
    for y, row in enumerate(rows):
        for r, g, b in zip(row[0::3], row[1::3], row[2::3]):
            if r < 96 and g < 96 and b < 96:
                dark += 1
                heading += y < 150
            elif r > 200 and g > 200 and b > 200:
                light += 1
    n = width * height
    assert light > n // 2, f"background not light: {light} of {n} pixels"
    assert dark > 2000, f"no text: {dark} dark pixels of {n}"
    assert heading > 200, f"no heading in the top 150 pixel rows: {heading} dark pixels"
