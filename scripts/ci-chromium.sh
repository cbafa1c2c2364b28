#!/usr/bin/env bash
# Make sure Debian's chromium is installed for the `browser` tests (headless dashboard checks).
# Prints the browser's path. Installs with apt-get when missing (needs root): scripts/ci-apt-tool.sh.
exec bash "$(dirname "$0")/ci-apt-tool.sh" chromium /usr/bin/chromium /usr/bin/chromium-browser chromium
