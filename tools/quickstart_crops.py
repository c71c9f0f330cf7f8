#!/usr/bin/env python3
"""quickstart_crops.py — makes the quickstart's dataset, assets/quickstart/:
the centre square of each photo in assets/photos (astronaut, chelsea, coffee),
resized to 128x128 (Lanczos), with its caption copied. Square, so that every
image trains at the 64x64 the quickstart samples at (orakul's aspect buckets
would train the 3:2 photos at 72x56, and a layout learnt at one grid does not
come back at another). Deterministic for one Pillow version.
Usage: python3 tools/quickstart_crops.py   (from anywhere; needs pillow) """
import os
import shutil

from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC, DST, SIZE = os.path.join(ROOT, "assets", "photos"), os.path.join(ROOT, "assets", "quickstart"), 128

os.makedirs(DST, exist_ok=True)
for name in ("astronaut", "chelsea", "coffee"):
    img = Image.open(os.path.join(SRC, name + ".png")).convert("RGB")
    w, h = img.size
    s = min(w, h)
    x, y = (w - s) // 2, (h - s) // 2
    img.crop((x, y, x + s, y + s)).resize((SIZE, SIZE), Image.LANCZOS).save(os.path.join(DST, name + ".png"),
                                                                             optimize=True)
    shutil.copyfile(os.path.join(SRC, name + ".txt"), os.path.join(DST, name + ".txt"))
    print(f"{name}: {w}x{h} -> centre {s}x{s} -> {SIZE}x{SIZE}")
