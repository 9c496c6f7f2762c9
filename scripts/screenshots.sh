#!/bin/sh
# Regenerates screenshots/*.png from the console's real render path (TestBackend -> SVG -> PNG).
# Needs rsvg-convert (Debian/Ubuntu: apt-get install -y librsvg2-bin).
# Usage: scripts/screenshots.sh [FIXTURE_ROOT]   (default: $PANTHEON_FIXTURE_ROOT or tests/fixtures/foreign-root)
set -eu
cd "$(dirname "$0")/.."
fixture="${1:-${PANTHEON_FIXTURE_ROOT:-tests/fixtures/foreign-root}}"
[ -d "$fixture" ] || { echo "error: fixture root not found; pass it as the first argument" >&2; exit 2; }
command -v rsvg-convert >/dev/null || { echo "error: rsvg-convert missing (apt-get install -y librsvg2-bin)" >&2; exit 2; }
cargo run --quiet --example screenshots -- screenshots "$fixture"
