#!/usr/bin/env bash
# The test set-up's browser: Debian's headless chromium, which the HTML report's test opens the page in
# (tests/reporters/html/test_html_report.py). Only as root with apt-get, and never a browser download.
# NEURON_PORT_NO_APT=1 skips it. apt never waits on a lock another apt or dpkg holds (two set-ups at once, an
# unattended upgrade): the step is skipped with one line, and the browser test says what is missing.
set -uo pipefail
browser="${NEURON_PORT_BROWSER:-chromium}"
command -v "$browser" >/dev/null 2>&1 && exit 0
if [ -n "${NEURON_PORT_NO_APT:-}" ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  exit 0
fi
echo "neuron-port: installing chromium (Debian) for the HTML report's browser test (about a minute)" >&2
start=$SECONDS
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=0 "$@" >"$log" 2>&1; }
if apt_get update -qq && apt_get install -y -qq chromium; then
  echo "neuron-port:   done in $((SECONDS - start)) s" >&2
elif grep -qiE "could not get lock|unable to acquire|is another process using it" "$log"; then
  echo "neuron-port: skipped installing chromium: another apt or dpkg holds its lock" \
       "($(grep -m1 -oiE 'held by process [0-9]+[^)]*\)?' "$log" || echo 'run apt-get later')); the browser test will say so" >&2
else
  echo "neuron-port: warning: chromium could not be installed; the HTML report's browser test needs it:" \
       "$(tail -n 1 "$log")" >&2
fi
exit 0
