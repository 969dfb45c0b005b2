"""check_report_browser.py: report.html rendered by a real browser.

    python check_report_browser.py REPORT.html SCREENSHOT.png ID=MARKS ...

Headless Chromium (Debian's `chromium`) loads the page from disk:
1. its DOM (--dump-dom, the document as the browser parsed it) holds each
   plot ID with exactly MARKS marks: <circle> elements in a line plot,
   <rect class="cell"> in a heatmap (svg_plot.h, svg_heatmap.h), so a page
   the HTML parser reads differently from refgeo's intent fails here;
2. every SVG text (titles, axis labels, legends, colour-bar titles, notes)
   lies inside its <svg>'s viewBox as the browser lays it out: measured by a
   script added to a temporary copy of the page (the page itself has none);
3. a screenshot saved to SCREENSHOT.png is not blank: over 2% of its pixels
   are not white and it holds at least 8 distinct colours (the plots'
   palette, bands and heatmap cells).
Exit 0 when both hold, 1 with one line naming what failed, 77 (skip) without
chromium or Pillow.
"""
import html
import html.parser
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

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


# Lists, in a <pre id="clipped">, each SVG text whose box (in its <svg>'s user
# units, through any rotation) leaves the viewBox by more than half a unit.
CLIP_SCRIPT = """<script>
window.addEventListener("load", () => {
  const out = [];
  for (const svg of document.querySelectorAll("svg")) {
    const vb = svg.viewBox.baseVal, to_svg = svg.getCTM().inverse();
    for (const t of svg.querySelectorAll("text")) {
      const b = t.getBBox(), m = t.getCTM();
      const xs = [], ys = [];
      for (const [x, y] of [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]]) {
        const p = svg.createSVGPoint();
        p.x = x, p.y = y;
        const q = p.matrixTransform(m).matrixTransform(to_svg);
        xs.push(q.x), ys.push(q.y);
      }
      if (Math.min(...xs) < vb.x - 0.5 || Math.max(...xs) > vb.x + vb.width + 0.5 ||
          Math.min(...ys) < vb.y - 0.5 || Math.max(...ys) > vb.y + vb.height + 0.5)
        out.push(svg.id + ": '" + t.textContent + "'");
    }
  }
  const pre = document.createElement("pre");
  pre.id = "clipped";
  pre.textContent = out.join("\\n");
  document.body.appendChild(pre);
});
</script>"""


def clipped_texts(browser, page):
    """The texts that run past their plot's edge, as the browser lays them out."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "measured.html"
        copy.write_text(page.read_text(encoding="utf-8").replace("</body>", CLIP_SCRIPT + "</body>"), encoding="utf-8")
        dom = subprocess.run([browser, *FLAGS, "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'<pre id="clipped">(.*?)</pre>', dom, re.S)
    if not m:
        return ["(the measuring script did not run)"]
    return [line for line in html.unescape(m.group(1)).split("\n") if line]


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
    clipped = clipped_texts(browser, page)
    if clipped:
        print(f"check_report_browser: {page}: {len(clipped)} labels run past their plot's edge, first {clipped[0]}")
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
    print(f"check_report_browser: {page}: {len(wants)} plots with their marks, no label past an edge; {shot}: "
          f"{img.size[0]}x{img.size[1]}, {inked:.1%} non-white, {colours} colours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
