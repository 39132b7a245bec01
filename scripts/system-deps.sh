#!/usr/bin/env bash
# Installs the Debian packages Kasir's tests (or, with `bench`, its benchmarks) need when missing:
# the PostgreSQL server (the suites start a throwaway cluster on 127.0.0.1); chromium for the payment-page
# browser tests (Playwright drives /usr/bin/chromium: `playwright install` is never run); nginx for the deployment
# test (tests/test_deployment.py runs deploy/nginx/kasir.conf; the package's own service is not used); nodejs for
# the provider SDK's card dialect script (tests/card/sdk_dialect.mjs: Node's own fetch, no npm package) and npm
# for openapi-typescript and tsc (`make node-deps`, tests/test_openapi_typescript.py); wrk for `make bench`.
# `make soak` needs only the PostgreSQL server. Both, and tests/callbacks/test_black_hole_dns.py, run processes in a
# mount namespace of their own (tests/support/blackhole_dns.py: unshare and mount, util-linux and mount, which
# Debian installs everywhere; checked all the same).
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v unshare >/dev/null || missing+=(util-linux)
command -v mount >/dev/null || missing+=(mount)
if [ "${1:-}" != "soak" ]; then
    [ -x /usr/bin/chromium ] || missing+=(chromium)
    [ -x /usr/sbin/nginx ] || missing+=(nginx)
    command -v node >/dev/null || missing+=(nodejs)
    command -v npm >/dev/null || missing+=(npm)  # Debian's nodejs comes without it (tests/support/typescript)
fi
if [ "${1:-}" = "bench" ]; then
    command -v wrk >/dev/null || missing+=(wrk)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "installing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
