#!/usr/bin/env bash
# install-deps.sh - install sdnpu's build and test dependencies from Debian packages.
# Only packages that are missing are installed; uses sudo when not run as root. python3 and
# python3-pip are the package client `sdnpu pull` runs to fetch real models; libmicrohttpd is the
# HTTP library of `sdnpu serve`; libcurl, curl and python3-venv are for its tests (scripts/test-server.sh);
# abigail-tools (abidw, abidiff) for the ABI check (scripts/check-abi.sh).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev libsqlite3-dev libxxhash-dev
      libpcre2-dev libcjson-dev libcmocka-dev libssl-dev libmicrohttpd-dev libcurl4-openssl-dev curl
      python3 python3-pip python3-venv abigail-tools)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "sdnpu: installing Debian packages: ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
