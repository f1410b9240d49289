#!/usr/bin/env bash
# Render a certificate (with the project's history ledger) to lab/report/report.md and
# lab/report/report.html, the plots to lab/report/plots/ (SVG and PNG), and, where Debian's
# chromium is installed, a screenshot of the HTML to lab/report/report.png.
#
#   lab/scripts/make_report.sh CERT.json [more afford report options, e.g. --expect "Tesla T4"]
#
# Runs from anywhere; uses the repository's src/ (PYTHON=python3 by default).
set -euo pipefail
cd "$(dirname "$0")/../.."
CERT=${1:?usage: lab/scripts/make_report.sh CERT.json [afford report options]}
shift
PY=${PYTHON:-python3}
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"

"$PY" -m afford report "$CERT" --history lab/history.tsv "$@" \
    -o lab/report/report.md --plots-dir lab/report/plots --force
"$PY" -m afford report "$CERT" --history lab/history.tsv "$@" \
    -o lab/report/report.html --force

if [ -x /usr/bin/chromium ]; then
    profile=$(mktemp -d)
    /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --window-size=1400,9000 \
        --screenshot="$PWD/lab/report/report.png" "file://$PWD/lab/report/report.html" \
        >/dev/null 2>&1
    rm -rf "$profile"
    echo "screenshot written to lab/report/report.png"
else
    echo "no /usr/bin/chromium: no screenshot (apt-get install -y chromium)" >&2
fi
