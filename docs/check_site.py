"""Open the built docs site in headless Chromium and keep screenshots (``.ci/run`` runs this).

    python docs/check_site.py [--site docs/_build/html] [--out docs/_build/screenshots]

Loads the index and one API page (``RoutingEnv``'s module) from the built HTML, dumps each
page's DOM as Chromium rendered it and checks that the text a reader should see is there
(the title, the navigation, the class), then writes a screenshot of each and checks that it is
a real picture (not one flat colour). Exits 1 naming the page that failed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
# Chromium as root (CI) on a machine without a display or network: no
# sandbox, no GPU, and none of the background connections a closed network refuses.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,900"]
# page -> what its rendered DOM must contain
PAGES = {
    "index.html": ["routing-gym", "Getting started", "Environments", "API reference", "Results"],
    "_generated/api/routing_gym.envs.routing_env.html": ["RoutingEnv", "Action Space", "Observation Space", "evaluate"],
}


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    raise SystemExit("check_site: no Chromium on PATH (Debian: apt-get install -y chromium)")


def render(browser: str, page: Path, shot: Path, profile: Path) -> str:
    """The page's DOM after Chromium rendered it; its screenshot lands in ``shot``."""
    common = [browser, *FLAGS, f"--user-data-dir={profile}"]
    url = page.resolve().as_uri()
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True, timeout=120, check=True)
    return dom


def distinct_colours(png: Path) -> int:
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(png)[..., :3].reshape(-1, 3)
    return len(np.unique((pixels * 255).astype(np.uint8), axis=0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, default=DOCS / "_build" / "html")
    parser.add_argument("--out", type=Path, default=DOCS / "_build" / "screenshots")
    args = parser.parse_args()
    browser = chromium()
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory() as profile:
        for name, expected in PAGES.items():
            page = args.site / name
            if not page.exists():
                failed.append(f"{page}: not built")
                continue
            shot = args.out / (Path(name).stem + ".png")
            dom = render(browser, page, shot, Path(profile))
            missing = [text for text in expected if text not in dom]
            colours = distinct_colours(shot) if shot.exists() else 0
            print(f"{name}: {len(dom):,} characters of DOM, screenshot {shot.name} with {colours:,} colours"
                  + (f"; missing {missing}" if missing else ""))
            if missing:
                failed.append(f"{name}: the rendered page lacks {missing}")
            if colours < 16:  # a blank or error page renders as one or two flat colours
                failed.append(f"{name}: the screenshot is blank ({colours} colours)")
    for problem in failed:
        print(f"check_site: {problem}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
