#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests (Playwright drives it; it cannot download a
# browser of its own here), and axe-core from the npm registry (the accessibility checks inject
# it into every page). Runs as root; does nothing that is already done.
# Progress goes to stderr; stdout gets two lines, the paths the tests read:
#   KERNELGRADER_CHROMIUM=/usr/bin/chromium
#   KERNELGRADER_AXE=<repo>/.cache/npm/node_modules/axe-core/axe.min.js
set -euo pipefail

AXE_VERSION=4.14.1  # pinned: a new release may add rules, which should be a change of ours

say() { printf 'ci-browser: %s\n' "$*" >&2; }
root="$(cd "$(dirname "$0")/.." && pwd)"

if ! command -v chromium >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        say "run this as root: it installs chromium (and npm where missing) with apt-get."
        exit 1
    fi
    say "installing chromium and npm with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    packages="chromium fonts-dejavu-core"
    command -v npm >/dev/null || packages="$packages npm"
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $packages >&2
fi
say "$(chromium --version 2>/dev/null | tail -n 1)"

prefix="$root/.cache/npm"
axe="$prefix/node_modules/axe-core/axe.min.js"
installed="$(sed -n 's/^ *"version": "\(.*\)",$/\1/p' "$prefix/node_modules/axe-core/package.json" 2>/dev/null | head -n 1 || true)"
if [ ! -f "$axe" ] || [ "$installed" != "$AXE_VERSION" ]; then
    say "installing axe-core@$AXE_VERSION from the npm registry into $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error \
        "axe-core@$AXE_VERSION" >&2
fi
say "axe-core $AXE_VERSION"
echo "KERNELGRADER_CHROMIUM=$(command -v chromium)"
echo "KERNELGRADER_AXE=$axe"
