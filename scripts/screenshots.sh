#!/bin/sh
# Regenerates every picture in one command: screenshots/*.png and screenshots/demo.gif, from the
# console's real render path. The demo's simulation runs to a rich moment (held dispatches, one held
# for its budget, a deadlock, a vote, the gods' usage), recorded by the real history recorder; each
# picture is drawn at one fixed clock (90 s after the simulated moment: nothing is dated in the
# future), TestBackend -> SVG -> PNG; the GIF joins the recording's frames.
# Scenes: every pane (the Ledger and pane 1's COST column included), the details, the dialogs (ack,
# abort, resolve, requeue, the budget raise of a dispatch held for its budget), the help, and the
# replay with its header bar and scrub line. A picture that would not show what its name says, or
# would repeat an earlier one, stops the script with an error.
# Needs rsvg-convert and ImageMagick (Debian/Ubuntu: apt-get install -y librsvg2-bin imagemagick).
# Usage: scripts/screenshots.sh [OUT_DIR]   (default: screenshots)
set -eu
cd "$(dirname "$0")/.."
command -v rsvg-convert >/dev/null || { echo "error: rsvg-convert missing (apt-get install -y librsvg2-bin)" >&2; exit 2; }
# ImageMagick's converter: `magick` (version 7), else the first `convert` that is ImageMagick's.
magick=""
if command -v magick >/dev/null; then
    magick=magick
else
    for c in convert /usr/bin/convert convert-im6.q16; do
        if command -v "$c" >/dev/null && "$c" -version 2>/dev/null | grep -q ImageMagick; then
            magick=$c
            break
        fi
    done
fi
[ -n "$magick" ] || { echo "error: ImageMagick missing (apt-get install -y imagemagick)" >&2; exit 2; }
PANTHEON_CONVERT=$magick cargo run --quiet --example screenshots -- "${1:-screenshots}"
