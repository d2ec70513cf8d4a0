#!/bin/bash
# edge-rl board install: what a board's first boot runs (cloud-init's runcmd), as root.
# Written into every bundle by `edge-rl flash`; docs/boards.md says what each step is for.
#
#   sudo bash install.sh [--no-start] [--purge-secrets]
#
# 1. the service user `edge-rl` (system user, no login, no home of its own)
# 2. a venv /opt/edge-rl/venv with this board's python3, and edge-rl[edge] from wheelhouse/
#    (pip --no-index: no network, no compiler)
# 3. etc/ -> /etc/edge-rl/ (secrets 0600 owned by edge-rl), reference/ -> /etc/edge-rl/reference
# 4. the systemd unit edge-rl-actor.service
# 5. `edge-rl doctor` as the service user: the board's own checks must pass (exit 1 if not);
#    with systemd running, the broker check too (a warning only: the learner may not be up)
# 6. with systemd running and without --no-start: enable and (re)start the unit
# --purge-secrets: afterwards, delete the key and password from this bundle (the boot
# partition is FAT: anyone with the card reads it). Safe to run again: each step checks.
set -euo pipefail
umask 022 # the venv and the public files readable by the service user, whatever called us

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PREFIX=/opt/edge-rl
ETC=/etc/edge-rl
SERVICE_USER=edge-rl
UNIT=edge-rl-actor.service
START=1
PURGE=0
for arg in "$@"; do
    case "$arg" in
        --no-start) START=0 ;;
        --purge-secrets) PURGE=1 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    esac
done

log() { echo "edge-rl install: $*"; }
fail() { echo "edge-rl install: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root: sudo bash $0"
# The system's Python (a user's own, e.g. under /root, is not the service user's to run).
PY=/usr/bin/python3
[ -x "$PY" ] || fail "no $PY on this board (apt install python3 python3-venv)"
PYV="$("$PY" -c 'import sys; print("%d%d" % sys.version_info[:2])')"
ls "$SRC"/wheelhouse/numpy-*-cp"$PYV"-*.whl >/dev/null 2>&1 \
    || fail "the wheelhouse has no wheels for this board's Python (cp$PYV): edge-rl flash --python $("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

# 1. The service user.
if ! getent group "$SERVICE_USER" >/dev/null; then
    groupadd --system "$SERVICE_USER"
fi
if ! id -u "$SERVICE_USER" >/dev/null 2>&1; then
    useradd --system --gid "$SERVICE_USER" --home-dir /var/lib/edge-rl --no-create-home \
        --shell /usr/sbin/nologin "$SERVICE_USER"
    log "created the service user $SERVICE_USER"
fi

# 2. The venv and edge-rl[edge], offline.
if [ ! -x "$PREFIX/venv/bin/python" ]; then
    "$PY" -m venv "$PREFIX/venv" || fail "python3 -m venv failed (apt install python3-venv)"
fi
"$PREFIX/venv/bin/pip" install -q --no-index --find-links "$SRC/wheelhouse" "edge-rl[edge]" \
    || fail "pip install from $SRC/wheelhouse failed"
# The same version number may carry new code: always take this bundle's edge-rl.
"$PREFIX/venv/bin/pip" install -q --no-index --no-deps --force-reinstall "$SRC"/wheelhouse/edge_rl-*.whl
log "installed $("$PREFIX/venv/bin/edge-rl" --help >/dev/null && "$PREFIX/venv/bin/pip" show edge-rl | sed -n 's/^Version: /edge-rl /p') in $PREFIX/venv"

# 3. The board's files. Public ones 0644 root; secrets 0600 owned by the service user.
install -d -m 0755 -o root -g root "$ETC" "$ETC/reference"
install -m 0644 -o root -g root "$SRC/etc/board.yaml" "$SRC/etc/policy.pub" "$ETC/"
install -m 0644 -o root -g root "$SRC/reference/model.tflite" "$SRC/reference/expected.npz" "$ETC/reference/"
install -d -m 0700 -o "$SERVICE_USER" -g "$SERVICE_USER" "$ETC/credentials"
for f in "$SRC"/etc/credentials/*; do
    [ -e "$f" ] || continue
    name="$(basename "$f")"
    case "$name" in
        *.key | password) install -m 0600 -o "$SERVICE_USER" -g "$SERVICE_USER" "$f" "$ETC/credentials/" ;;
        *) install -m 0644 -o root -g root "$f" "$ETC/credentials/" ;;
    esac
done
log "installed $ETC (board $(sed -n 's/^board: //p' "$ETC/board.yaml"))"

# 4. The unit.
install -m 0644 -o root -g root "$SRC/edge-rl-actor.service" "/etc/systemd/system/$UNIT"
install -d -m 0755 -o "$SERVICE_USER" -g "$SERVICE_USER" /var/lib/edge-rl

# 5. The doctor, as the user the service runs as (so the file modes are tested too).
DOCTOR=(runuser -u "$SERVICE_USER" -- "$PREFIX/venv/bin/edge-rl" doctor --config "$ETC/board.yaml")
SYSTEMD=0
if [ -d /run/systemd/system ]; then SYSTEMD=1; fi
report=/var/lib/edge-rl/doctor.txt
cd /var/lib/edge-rl # a working directory the service user may read
if ! "${DOCTOR[@]}" --skip-broker | tee "$report"; then
    cp "$report" "$SRC/doctor.txt" 2>/dev/null || true
    fail "edge-rl doctor: this board cannot act (the FAIL lines above say what to fix)"
fi
if [ "$SYSTEMD" -eq 1 ] && [ "$START" -eq 1 ]; then
    # No real-time clock on a Pi: certificates check only once NTP set the time (bounded).
    for _ in $(seq 60); do
        [ "$(timedatectl show -p NTPSynchronized --value 2>/dev/null)" = yes ] && break
        sleep 2
    done
    if ! "${DOCTOR[@]}" | tee "$report"; then
        log "warning: the broker check failed (above); the service keeps trying to connect"
    fi
fi
cp "$report" "$SRC/doctor.txt" 2>/dev/null || true # readable from the card on another machine

# 6. Start it (not in a chroot, nor with --no-start).
if [ "$SYSTEMD" -eq 1 ] && [ "$START" -eq 1 ]; then
    systemctl daemon-reload
    systemctl enable "$UNIT"
    systemctl restart "$UNIT"
    log "started $UNIT (journalctl -u $UNIT -f)"
else
    log "not started (--no-start or no systemd); later: systemctl enable --now $UNIT"
fi

if [ "$PURGE" -eq 1 ]; then
    rm -f "$SRC"/etc/credentials/*.key "$SRC"/etc/credentials/password
    log "deleted the key and password from $SRC (installed copies: $ETC/credentials)"
fi
log "done: actor $(sed -n 's/^  id: //p' "$ETC/board.yaml")"
