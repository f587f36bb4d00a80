#!/usr/bin/env bash
# Renders every example record of DATA_DIR with `epo report`, opens each page in headless
# Chromium, takes a screenshot into OUT_DIR and fails when a page is blank (almost every pixel
# the background) or the browser logs a console message (an error, a failed resource load).
# Exit 77 (skipped) when Chromium or python3 is not installed.
# Usage: render_check.sh EPO_BIN DATA_DIR OUT_DIR
set -euo pipefail
epo=$1 data=$2 out=$3
browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium found (apt-get install chromium, or make test as root installs it)"
  exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIPPED: python3 is needed to read the screenshots"
  exit 77
fi
mkdir -p "$out"
status=0
for input in "$data"/*.json; do
  name=$(basename "$input" .json)
  html="$out/$name.html" png="$out/$name.png" log="$out/$name.log"
  "$epo" report "$input" --html "$html" >/dev/null
  # A fresh profile per page; the console goes to stderr (--enable-logging=stderr).
  profile=$(mktemp -d)
  timeout 120 "$browser" --headless --disable-gpu --no-sandbox --hide-scrollbars \
    --user-data-dir="$profile" --enable-logging=stderr --v=0 \
    --window-size=1200,2400 --screenshot="$png" "file://$html" >"$log" 2>&1 || true
  rm -rf "$profile"
  if [ ! -s "$png" ]; then
    echo "FAIL $name: no screenshot (see $log)"; status=1; continue
  fi
  if grep -q ":CONSOLE" "$log"; then
    echo "FAIL $name: console messages:"; grep ":CONSOLE" "$log"; status=1; continue
  fi
  if ! verdict=$(python3 "$(dirname "$0")/png_ink.py" "$png"); then
    echo "FAIL $name: $verdict"; status=1; continue
  fi
  echo "ok   $name: $(wc -c <"$html") bytes of HTML, screenshot $png: $verdict"
done
exit $status
