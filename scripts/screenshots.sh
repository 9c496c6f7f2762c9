#!/bin/sh
# Regenerates screenshots/*.png and screenshots/demo.gif from the console's real render path: the demo's
# simulation runs to a rich moment (held dispatch, deadlock, vote), TestBackend -> SVG -> PNG; the GIF
# joins the recording's frames.
# Needs rsvg-convert and ImageMagick (Debian/Ubuntu: apt-get install -y librsvg2-bin imagemagick).
# Usage: scripts/screenshots.sh [OUT_DIR]   (default: screenshots)
set -eu
cd "$(dirname "$0")/.."
command -v rsvg-convert >/dev/null || { echo "error: rsvg-convert missing (apt-get install -y librsvg2-bin)" >&2; exit 2; }
command -v convert >/dev/null || { echo "error: ImageMagick's convert missing (apt-get install -y imagemagick)" >&2; exit 2; }
cargo run --quiet --example screenshots -- "${1:-screenshots}"
