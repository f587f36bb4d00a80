#!/usr/bin/env bash
# Installs the Debian packages EPO needs when they are missing (as root), or prints the exact
# apt-get line to run and stops (without root). Presence is checked by the files the build uses,
# so a machine that has them from elsewhere is left alone. EPO_WITH_MPI=1 (make EPO_WITH_MPI=1)
# adds Open MPI for `epo run` over several processes. `setup.sh --browser` (make test) installs
# only Chromium, for the test that renders the HTML reports; without root it says how and goes on
# (the test is then skipped). Chromium costs about a minute and 414 MB of disk (122 MB download).
set -euo pipefail

if [ "${1:-}" = "--browser" ]; then
  for b in chromium chromium-browser google-chrome; do
    command -v "$b" >/dev/null 2>&1 && exit 0
  done
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "epo: chromium is missing, the HTML report browser test will be skipped" >&2
    echo "epo: to run it, as root:  apt-get install -y --no-install-recommends chromium" >&2
    exit 0
  fi
  echo "epo: installing chromium (for the HTML report browser test)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null || \
    echo "epo: chromium could not be installed; the browser test will be skipped" >&2
  exit 0
fi

have_header() {
  local h=$1
  for d in /usr/include /usr/local/include /usr/include/eigen3 /usr/local/include/eigen3; do
    [ -e "$d/$h" ] && return 0
  done
  return 1
}

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
have_header Eigen/Core || missing+=(libeigen3-dev)
have_header CLI/CLI.hpp || missing+=(libcli11-dev)
have_header nlohmann/json.hpp || missing+=(nlohmann-json3-dev)
{ have_header catch2/catch.hpp || have_header catch2/catch_test_macros.hpp; } || missing+=(catch2)
if [ "${EPO_WITH_MPI:-0}" = 1 ]; then
  command -v mpicxx >/dev/null 2>&1 || missing+=(libopenmpi-dev)
  command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "epo: missing packages: ${missing[*]}" >&2
  echo "epo: run as root:  apt-get update && $line" >&2
  exit 1
fi
echo "epo: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$line
