#!/bin/sh
# Regenerates screenshots/*.png from the console's real render path (TestBackend -> SVG -> PNG).
# Needs rsvg-convert (Debian/Ubuntu: apt-get install -y librsvg2-bin).
# Usage: scripts/screenshots.sh [FIXTURE_ROOT]   (default: $PANTHEON_FIXTURE_ROOT or ../shared/fixtures/foreign-root)
set -eu
cd "$(dirname "$0")/.."
fixture="${1:-${PANTHEON_FIXTURE_ROOT:-}}"
if [ -z "$fixture" ]; then
  for d in ../shared/fixtures/foreign-root ../../shared/fixtures/foreign-root; do
    if [ -d "$d" ]; then fixture="$d"; break; fi
  done
fi
[ -d "$fixture" ] || { echo "error: fixture root not found; pass it as the first argument" >&2; exit 2; }
command -v rsvg-convert >/dev/null || { echo "error: rsvg-convert missing (apt-get install -y librsvg2-bin)" >&2; exit 2; }
cargo run --quiet --example screenshots -- screenshots "$fixture"
