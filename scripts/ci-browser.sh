#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests (Playwright drives it; it cannot download a
# browser of its own here). Runs as root; does nothing when Chromium is already installed.
# Progress goes to stderr; stdout gets one line, the path the tests read:
#   KERNELGRADER_CHROMIUM=/usr/bin/chromium
set -euo pipefail

say() { printf 'ci-browser: %s\n' "$*" >&2; }

if ! command -v chromium >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        say "run this as root: it installs chromium with apt-get."
        exit 1
    fi
    say "installing chromium with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
fi
say "$(chromium --version 2>/dev/null | tail -n 1)"
echo "KERNELGRADER_CHROMIUM=$(command -v chromium)"
