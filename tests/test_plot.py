#!/usr/bin/env python3
"""test_plot: memest --plot (cli/plot.c).

usage: test_plot.py MEMEST MODELS_DIR TMP_DIR [--render]

Checks the SVG and HTML pictures of resnet18's step as XML: a band per
category that holds memory, the reserved line, the peak marked with the
report's peak and layer, the GPU's usable memory with --gpu, phases named,
every coordinate inside the picture; and the usage errors. With --render it
renders the HTML page in headless Chromium and checks the screenshot is a
PNG of the page's size that is not blank; it exits 77 (skipped) where no
Chromium is installed.
"""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL", what)


def run(memest, *args):
    return subprocess.run([memest, *args], capture_output=True, text=True)


def picture(memest, models, tmp, name, *extra):
    path = os.path.join(tmp, name)
    out = run(memest, os.path.join(models, "resnet18.onnx"), "--batch", "32", "--plot", path, *extra)
    check(out.returncode == 0, f"--plot {name}: exit {out.returncode}: {out.stderr[-200:]}")
    return path


def svg_root(path, html):
    text = open(path).read()
    if html:
        check(text.startswith("<!DOCTYPE html>") and "</body></html>" in text, "html: a page around the svg")
        text = text[text.index("<svg"):text.index("</svg>") + 6]
    return ET.fromstring(text)


def main():
    memest, models, tmp = sys.argv[1:4]
    if "--render" in sys.argv:
        return render(memest, models, tmp)
    report = json.loads(run(memest, os.path.join(models, "resnet18.onnx"), "--batch", "32", "--format", "json").stdout)
    peak = report["peak"]
    for name, html, extra in (("r18.svg", False, ["--gpu", "T4"]), ("r18.html", True, ["--gpu-memory", "2GiB"])):
        root = svg_root(picture(memest, models, tmp, name, *extra), html)
        w, h = float(root.get("width")), float(root.get("height"))
        bands = {p.get("class") for p in root.iter(NS + "polygon")}
        held = {k for k, v in peak["breakdown"].items() if v}
        check({f"cat-{k}" for k in held} <= bands, f"{name}: bands {sorted(bands)} lack some of {sorted(held)}")
        check(any(p.get("class") == "reserved" for p in root.iter(NS + "polyline")), f"{name}: no reserved line")
        texts = [t.text or "" for t in root.iter(NS + "text")]
        label = next((t for t in texts if t.startswith("peak ")), "")
        check("846.19 MiB" in label and peak["layer"] in label and peak["phase"] in label,
              f"{name}: peak label '{label}'")
        check("forward" in texts and "backward" in texts, f"{name}: phases not named")
        gpu = [t for t in root.iter() if t.get("class") == "gpu"]
        check(gpu, f"{name}: no GPU limit")
        for el in root.iter():
            for attr in ("x", "y", "cx", "cy", "x1", "x2", "y1", "y2"):
                if el.get(attr) is not None:
                    v = float(el.get(attr))
                    check(-1 <= v <= max(w, h) + 1, f"{name}: {el.tag} {attr}={v} outside the picture")
            for pt in (el.get("points") or "").split():
                x, y = map(float, pt.split(","))
                check(0 <= x <= w and 0 <= y <= h, f"{name}: point {pt} outside the picture")
    out = run(memest, os.path.join(models, "resnet18.onnx"), "--batch", "32", "--plot", os.path.join(tmp, "x.png"))
    check(out.returncode == 2 and ".svg or .html" in out.stderr, "--plot x.png is a usage error")
    out = run(memest, os.path.join(models, "resnet18.onnx"), "--plot", os.path.join(tmp, "x.svg"), "--max-batch",
              "--gpu", "T4")
    check(out.returncode == 2, "--plot with --max-batch is a usage error")
    print("test_plot: all checks passed" if not failures else f"test_plot: {failures} failure(s)")
    return 1 if failures else 0


def render(memest, models, tmp):
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome", "headless_shell")
                    if shutil.which(b)), None)
    if not browser:
        print("test_plot: no Chromium found, skipping the render")
        return 77
    page = picture(memest, models, tmp, "render.html", "--gpu", "T4")
    png = os.path.join(tmp, "render.png")
    out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                          "--window-size=1040,480", "file://" + os.path.abspath(page)], capture_output=True, text=True,
                         timeout=120)
    check(out.returncode == 0 and os.path.exists(png), f"chromium: exit {out.returncode}: {out.stderr[-300:]}")
    if os.path.exists(png):
        data = open(png, "rb").read()
        check(data[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG")
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        check((width, height) == (1040, 480), f"screenshot {width}x{height}")
        check(len(data) > 20000, f"the screenshot is {len(data)} bytes: blank?")
    print("test_plot: render checks passed" if not failures else f"test_plot: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
