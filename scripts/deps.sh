# Sourced by scripts/run, scripts/test and scripts/install: installs what a fresh Debian machine
# lacks. Only Debian packages are used; Swift itself must already be on PATH (see README.md).
# Safe to source repeatedly: it installs nothing when everything is present.

snapsync_need_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
        echo "snapsync: need root (or sudo) to run: $*" >&2; return 1; fi
}

# snapsync_install_deps [extra debian packages...]
snapsync_install_deps() {
    local missing=()
    pkg-config --exists libevent_core 2>/dev/null || missing+=(libevent-dev)
    # evhttp, the metrics endpoint's HTTP server (same Debian package).
    pkg-config --exists libevent_extra 2>/dev/null || missing+=(libevent-dev)
    pkg-config --exists zlib 2>/dev/null || missing+=(zlib1g-dev)
    # The TLS listener (libssl), and the openssl tool its tests make certificates with.
    pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    # snapcat's tests check the systemd unit (systemd-analyze) and trace the daemon's system
    # calls against the unit's filter (strace); without them those checks would be skipped.
    command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    # The metrics tests scrape with curl (Swift) and urllib + prometheus_client's parser (Python).
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    # Cluster mode: NATS JetStream servers (scripts/cluster, its tests) and libnats, the C
    # client the daemon's CNats target links through pkg-config.
    command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
    pkg-config --exists libnats 2>/dev/null || missing+=(libnats-dev)
    local p
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "snapsync: installing ${missing[*]}" >&2
        snapsync_need_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        snapsync_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    # prometheus_client reads /metrics in scripts/tests/test_metrics.py: the reference parser of
    # the text format. Debian's python3 gets Debian's package (its pip refuses system installs);
    # another python3 on PATH (pyenv, a venv) gets it from PyPI with its own pip.
    if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
        if [ "$(python3 -c 'import sys; print(sys.prefix)')" = /usr ]; then
            echo "snapsync: installing python3-prometheus-client" >&2
            snapsync_need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-prometheus-client >/dev/null
        else
            echo "snapsync: installing prometheus_client (pip)" >&2
            PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet prometheus_client \
                || PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --user prometheus_client
        fi
    fi
    if ! command -v swift >/dev/null 2>&1; then
        if [ -x /opt/swift/usr/bin/swift ]; then export PATH=/opt/swift/usr/bin:$PATH; else
            echo "snapsync: Swift 6 toolchain not found on PATH (https://www.swift.org/install/linux/)" >&2
            return 1
        fi
    fi
}
