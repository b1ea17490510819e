#!/usr/bin/python3
"""Writes the images that the OCR tests and benchmark read into DIR (made new each run, the
same bytes every run: Debian's Pillow and DejaVu fonts, seeded noise).

  scripts/ocr-images.py DIR [--a4-only]

Needs Debian's python3-pil and fonts-dejavu-core (scripts/setup-ocr.sh installs them).
Each image's expected words are in DIR/expected.json.
"""

import json
import random
import struct
import sys
import zlib
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = Path("/usr/share/fonts/truetype/dejavu")
SANS = FONTS / "DejaVuSans.ttf"
SERIF = FONTS / "DejaVuSerif.ttf"
MONO = FONTS / "DejaVuSansMono.ttf"

# Words a test looks for: plain English, digits and an error code, as a screenshot holds.
LINES = [
    "Invoice 4471 was paid on Thursday",
    "connect ECONNREFUSED 127.0.0.1:5432",
    "The quick brown fox jumps over the lazy dog",
]


def font(path, size):
    return ImageFont.truetype(str(path), size)


def page(lines, size, path=SANS, margin=None, width=None):
    """Black text on white, one line per entry, in an 8-bit grey image."""
    f = font(path, size)
    margin = margin if margin is not None else size
    gap = size // 2
    heights = [f.getbbox(line)[3] for line in lines]
    w = width or max(int(f.getlength(line)) for line in lines) + 2 * margin
    h = sum(heights) + gap * (len(lines) - 1) + 2 * margin
    im = Image.new("L", (w, h), 255)
    d = ImageDraw.Draw(im)
    y = margin
    for line, lh in zip(lines, heights):
        d.text((margin, y), line, font=f, fill=0)
        y += lh + gap
    return im


def a4_page():
    """A dense A4 page at 300 dpi (2480 x 3508): 11 pt serif text, as a scanner gives it."""
    rng = random.Random(7)
    words = (
        "axocoatl records every turn in an append only ledger before the model is called "
        "so agents survive kill and can be stopped retried rewound searched and audited "
        "attachments are immutable references whose text is extracted once"
    ).split()
    f = font(SERIF, 46)  # 11 pt at 300 dpi
    im = Image.new("L", (2480, 3508), 255)
    d = ImageDraw.Draw(im)
    y = 300
    while y < 3508 - 300:
        line = []
        while True:
            w = rng.choice(words)
            if f.getlength(" ".join(line + [w])) > 2480 - 2 * 300:
                break
            line.append(w)
        d.text((300, y), " ".join(line), font=f, fill=0)
        y += 70
    return im


def noisy_photo(im):
    """A phone photo of a printed page: grey paper lit unevenly, a slight tilt, blur, sensor
    noise, JPEG at quality 70."""
    rng = random.Random(42)
    w, h = im.size
    im = im.rotate(2.5, resample=Image.BICUBIC, expand=True, fillcolor=255)
    w, h = im.size
    light = Image.linear_gradient("L").resize((w, h)).point(lambda v: 200 + v // 5)
    paper = Image.composite(Image.new("L", (w, h), 40), light, im.point(lambda v: 255 - v))
    paper = paper.filter(ImageFilter.GaussianBlur(1.2))
    px = paper.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = max(0, min(255, px[x, y] + int(rng.gauss(0, 18))))
    return paper.convert("RGB")


def no_text():
    """Shapes and a gradient: nothing to read."""
    im = Image.linear_gradient("L").resize((640, 480)).convert("RGB")
    d = ImageDraw.Draw(im)
    d.ellipse((80, 60, 300, 280), fill=(200, 40, 40))
    d.rectangle((360, 200, 600, 420), fill=(40, 120, 200))
    d.polygon([(100, 440), (220, 320), (340, 440)], fill=(30, 160, 60))
    return im


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb(side=30000):
    """A real PNG bomb: a side x side 1-bit image of zeros, about 110 KB on disk and 112 MB
    of pixels once inflated (and 3.6 GB as 32-bit pixels)."""
    row = b"\0" + b"\0" * ((side + 7) // 8)
    z = zlib.compressobj(9)
    body = b"".join(z.compress(row) for _ in range(side)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", body) + png_chunk(b"IEND", b"")


def tiff_bomb():
    """Two pages: an honest 8 x 8 one, then one whose directory says 40,000 x 40,000 pixels
    over the same 64 bytes of strip."""

    def ifd(w, h, nxt):
        entries = [(256, 4, w), (257, 4, h), (258, 3, 8), (259, 3, 1), (262, 3, 1), (273, 4, 8), (277, 3, 1), (278, 4, h), (279, 4, 64)]
        body = struct.pack("<H", len(entries))
        for tag, kind, value in entries:
            body += struct.pack("<HHI", tag, kind, 1) + (struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value))
        return body + struct.pack("<I", nxt)

    first = 8 + 64
    second = first + len(ifd(0, 0, 0))
    return b"II*\0" + struct.pack("<I", first) + bytes(range(64)) + ifd(8, 8, second) + ifd(40000, 40000, 0)


def pdf(pages):
    """A minimal PDF. Each page is ("text", str) with a text layer in Helvetica, or
    ("image", dict, bytes) with one image XObject drawn over the whole page."""
    objects = []

    def add(body):
        objects.append(body)
        return len(objects)

    font_id = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    pages_id = add(None)  # filled below
    kids = []
    for p in pages:
        if p[0] == "text":
            content = b"BT /F1 18 Tf 72 720 Td (" + p[1].encode() + b") Tj ET"
            resources = b"<< /Font << /F1 %d 0 R >> >>" % font_id
        else:
            _, info, data = p
            keys = b"".join(b"/%s %s " % (k.encode(), v.encode()) for k, v in info.items())
            img = add(
                b"<< /Type /XObject /Subtype /Image %s/Length %d >>\nstream\n" % (keys, len(data))
                + data
                + b"\nendstream"
            )
            content = b"q 612 0 0 792 0 0 cm /Im0 Do Q"
            resources = b"<< /XObject << /Im0 %d 0 R >> >>" % img
        stream = add(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources %s /Contents %d 0 R >>"
                % (pages_id, resources, stream)
            )
        )
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    out = BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for o in offsets:
        out.write(b"%010d 00000 n \n" % o)
    out.write(b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref))
    return out.getvalue()


def jpeg(im, quality=85):
    b = BytesIO()
    im.save(b, "JPEG", quality=quality)
    return b.getvalue()


def g4(im):
    """CCITT group 4 data of a 1-bit image, as a scanner's PDF holds it (the strip of a
    single-strip TIFF)."""
    b = BytesIO()
    im.save(b, "TIFF", compression="group4", strip_size=(im.width + 7) // 8 * im.height)
    t = Image.open(BytesIO(b.getvalue()))
    offset, count = t.tag_v2[273][0], t.tag_v2[279][0]
    return b.getvalue()[offset : offset + count]


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    a4 = a4_page()
    a4.save(out / "a4.png", optimize=False)
    expected["a4.png"] = ["axocoatl", "ledger", "attachments"]
    a4.rotate(180).save(out / "a4-turned.png", optimize=False)
    expected["a4-turned.png"] = ["axocoatl", "ledger", "attachments"]
    if "--a4-only" in sys.argv:
        return
    # Four such pages in one TIFF: long enough to read that a stop lands in the middle.
    a4.save(out / "a4x4.tiff", compression="tiff_lzw", save_all=True, append_images=[a4, a4, a4])
    expected["a4x4.tiff"] = ["axocoatl", "ledger"]

    # The same words at several sizes (pixels of the font's em).
    for size in (14, 20, 32, 64):
        page(LINES, size).save(out / f"size{size}.png")
        expected[f"size{size}.png"] = ["Invoice", "4471", "ECONNREFUSED", "quick", "brown"]

    # Every format OCR reads, from one page.
    base = page(LINES[:2], 32)
    base.convert("RGB").save(out / "page.jpg", quality=90)
    base.save(out / "page.tiff", compression="tiff_lzw")
    base.save(out / "page.webp", lossless=True)
    base.save(out / "page.bmp")
    base.convert("1").save(out / "page-g4.tiff", compression="group4")
    for name in ("page.jpg", "page.tiff", "page.webp", "page.bmp", "page-g4.tiff"):
        expected[name] = ["Invoice", "4471", "ECONNREFUSED"]
    # Two pages in one TIFF, as a fax or a scanner's document feeder writes them.
    second = page(["Second page says Rhinoceros"], 32)
    base.save(out / "two-pages.tiff", compression="tiff_lzw", save_all=True, append_images=[second])
    expected["two-pages.tiff"] = ["Invoice", "Rhinoceros"]

    # A page turned a quarter (a scan fed sideways) and one upside down.
    turned = page(LINES, 28)
    turned.rotate(90, expand=True, fillcolor=255).save(out / "rotated90.png")
    turned.rotate(180, expand=True, fillcolor=255).save(out / "rotated180.png")
    expected["rotated90.png"] = ["Invoice", "ECONNREFUSED", "quick"]
    expected["rotated180.png"] = ["Invoice", "ECONNREFUSED", "quick"]

    noisy_photo(page(LINES, 40, margin=80)).save(out / "photo.jpg", quality=70)
    expected["photo.jpg"] = ["Invoice", "4471", "quick", "brown"]

    no_text().save(out / "no-text.png")
    expected["no-text.png"] = []

    (out / "bomb.png").write_bytes(bomb())
    expected["bomb.png"] = []
    (out / "bomb.tiff").write_bytes(tiff_bomb())
    expected["bomb.tiff"] = []

    # A PDF with a text layer on page 1 and scans on pages 2 to 4 (JPEG, CCITT G4, raw
    # grey pixels through Flate), and one whose only image is JBIG2 (not read).
    scan = page(["Scanned page two mentions Walrus"], 40, width=1200)
    fax = page(["Faxed page three mentions Pelican"], 40, width=1200).convert("1")
    raw = page(["Raw page four mentions Flamingo"], 40, width=1200)
    grey = lambda im: {"Width": str(im.width), "Height": str(im.height), "BitsPerComponent": "8", "ColorSpace": "/DeviceGray"}
    (out / "mixed.pdf").write_bytes(
        pdf(
            [
                ("text", "The text layer says Kangaroo"),
                ("image", dict(grey(scan), Filter="/DCTDecode"), jpeg(scan)),
                (
                    "image",
                    {
                        "Width": str(fax.width),
                        "Height": str(fax.height),
                        "BitsPerComponent": "1",
                        "ColorSpace": "/DeviceGray",
                        "Filter": "/CCITTFaxDecode",
                        "DecodeParms": "<< /K -1 /Columns %d /Rows %d /BlackIs1 true >>" % (fax.width, fax.height),
                    },
                    g4(fax),
                ),
                ("image", dict(grey(raw), Filter="/FlateDecode"), zlib.compress(raw.tobytes())),
            ]
        )
    )
    expected["mixed.pdf"] = ["Kangaroo", "Walrus", "Pelican", "Flamingo"]
    (out / "jbig2.pdf").write_bytes(
        pdf([("image", {"Width": "100", "Height": "100", "BitsPerComponent": "1", "ColorSpace": "/DeviceGray", "Filter": "/JBIG2Decode"}, b"\0" * 64)])
    )
    expected["jbig2.pdf"] = []
    # A scan whose image says it is 30,000 x 30,000 pixels behind 1 KB of Flate data.
    (out / "bomb.pdf").write_bytes(
        pdf([("image", {"Width": "30000", "Height": "30000", "BitsPerComponent": "8", "ColorSpace": "/DeviceGray", "Filter": "/FlateDecode"}, zlib.compress(bytes(100000)))])
    )
    expected["bomb.pdf"] = []

    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
