#!/usr/bin/env python3
"""Writes a hostile PDF to stdout: PAGES pages (default 300) whose contents are one shared
Flate stream inflating to about MB megabytes (default 60) of text-showing operations, or,
with `distinct`, a stream of drawing operations of its own per page. The shared one is the
"108 KB PDF" of the decompression-bomb report; the distinct one makes every page cost.

    bench/hostile_pdf.py [PAGES] [MB] [shared|distinct] > bomb.pdf
"""
import sys
import zlib

pages = int(sys.argv[1]) if len(sys.argv) > 1 else 300
mb = int(sys.argv[2]) if len(sys.argv) > 2 else 60
mode = sys.argv[3] if len(sys.argv) > 3 else "shared"

if mode == "shared":
    line = b"BT /F1 12 Tf 72 700 Td (" + b"A" * 65536 + b") Tj ET\n"
else:
    line = b"0.5 0 0 RG 10 10 m 200 200 l S\n"
content = zlib.compress(line * ((mb << 20) // len(line) + 1), 9)

objects = []  # bodies, numbered from 1


def add(body):
    objects.append(body)
    return len(objects)


font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
resources = add(b"<< /Font << /F1 %d 0 R >> >>" % font)
stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream"
shared = add(stream)
pages_id = add(None)
kids = []
for i in range(pages):
    contents = shared if mode == "shared" or i == 0 else add(stream)
    kids.append(add(b"<< /Type /Page /Parent %d 0 R /Contents %d 0 R /Resources %d 0 R /MediaBox [0 0 595 842] >>"
                    % (pages_id, contents, resources)))
objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
    b" ".join(b"%d 0 R" % k for k in kids), pages)
catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)

out = bytearray(b"%PDF-1.5\n")
offsets = []
for n, body in enumerate(objects, 1):
    offsets.append(len(out))
    out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
xref = len(out)
out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
for o in offsets:
    out += b"%010d 00000 n \n" % o
out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref)
sys.stdout.buffer.write(bytes(out))
