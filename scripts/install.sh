#!/bin/sh
# Install what the testbed needs, idempotently: Debian/Ubuntu packages that are missing, then a
# virtualenv (.venv) built on the system Python (the one Debian's Mininet module is built for)
# with the project installed in editable mode. Used by the Makefile and the Vagrantfile.
set -eu
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PACKAGES="mininet tcpdump tshark iperf3 ethtool iproute2 nftables iptables procps kmod
python3 python3-venv python3-pip python3-dev gcc user-mode-linux iputils-ping tcptrace make curl
chromium"

# the VM (testbed vm, --backend netem-vm) is built and booted with these; they stay out of its image
VM_HOST_PACKAGES="qemu-system-x86 mmdebstrap e2fsprogs"
# `install.sh --packages`: the list alone, which the VM image is built from (testbed/backends/vm)
if [ "${1:-}" = "--packages" ]; then echo $PACKAGES; exit 0; fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (it installs Debian packages and the testbed needs root to run)" >&2
  exit 1
fi

missing=""
for p in $PACKAGES $VM_HOST_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install.sh: installing Debian packages:$missing"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no without a terminal.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -q
  # shellcheck disable=SC2086
  apt-get install -y -q $missing
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "install.sh: creating $VENV on /usr/bin/python3 with system site-packages (for Mininet)"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
stamp="$VENV/.installed"
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[test,cluster]"   # runtime deps + test tools + Dask (setup.cfg)
  touch "$stamp"
fi
"$VENV/bin/python" -m testbed.emulator.native.build  # native emulator engine (gcc, idempotent)
make -s -C analysis/native  # analysis fast path (gcc; rebuilt when its source changes)
"$VENV/bin/python" -c "import mininet.net, numpy, scapy, testbed" \
  || { echo "install.sh: the virtualenv cannot import mininet/numpy/scapy/testbed" >&2; exit 1; }
"$VENV/bin/python" -m testbed.backends.uml.provision || echo "install.sh: UML provisioning failed; all but --backend netem-uml works" >&2  # a UML guest that boots (TESTBED_UML=provision forces a fetched one)
