"""check_report_browser.py: report.html rendered by a real browser.

    python check_report_browser.py REPORT.html SCREENSHOT.png ID=MARKS ...

Headless Chromium (Debian's `chromium`) loads the page from disk:
1. its DOM (--dump-dom, the document as the browser parsed it) holds each
   plot ID with exactly MARKS marks: <circle> elements in a line plot,
   <rect class="cell"> in a heatmap (svg_plot.h, svg_heatmap.h), so a page
   the HTML parser reads differently from refgeo's intent fails here;
2. a screenshot saved to SCREENSHOT.png is not blank: over 2% of its pixels
   are not white and it holds at least 8 distinct colours (the plots'
   palette, bands and heatmap cells).
Exit 0 when both hold, 1 with one line naming what failed, 77 (skip) without
chromium or Pillow.
"""
import html.parser
import pathlib
import shutil
import subprocess
import sys

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio"]


class MarkCounter(html.parser.HTMLParser):
    """Counts circles and heatmap cells inside each <svg id=...>."""

    def __init__(self):
        super().__init__()
        self.svg_id = None
        self.marks = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg_id = a.get("id")
            self.marks.setdefault(self.svg_id, 0)
        elif self.svg_id and (tag == "circle" or (tag == "rect" and a.get("class") == "cell")):
            self.marks[self.svg_id] += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg_id = None


def main():
    page, shot, wants = pathlib.Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3:]
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
    try:
        from PIL import Image
    except ImportError:
        Image = None
    if not browser or not Image:
        print("check_report_browser: skipped, no chromium or Pillow")
        return 77
    dom = subprocess.run([browser, *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    counter = MarkCounter()
    counter.feed(dom.stdout)
    for want in wants:
        plot, n = want.split("=")
        got = counter.marks.get(plot)
        if got != int(n):
            print(f"check_report_browser: {page}: {plot} has {got} marks in the browser's DOM, want {n}")
            return 1
    subprocess.run([browser, *FLAGS, "--window-size=1100,6000", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    img = Image.open(shot).convert("RGB")
    counts = img.getcolors(maxcolors=img.width * img.height)  # [(count, (r, g, b)), ...]
    white = sum(n for n, rgb in counts if rgb == (255, 255, 255))
    inked = 1 - white / (img.width * img.height)
    colours = len(counts)
    if inked < 0.02 or colours < 8:
        print(f"check_report_browser: {shot}: looks blank ({inked:.1%} non-white pixels, {colours} colours)")
        return 1
    print(f"check_report_browser: {page}: {len(wants)} plots with their marks; {shot}: "
          f"{img.size[0]}x{img.size[1]}, {inked:.1%} non-white, {colours} colours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
