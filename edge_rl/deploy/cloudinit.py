"""cloud-init files for Raspberry Pi OS (trixie-based images, from the 2 October 2025 release).

Those images read ``user-data``, ``network-config`` and ``meta-data`` from the boot
partition (FAT, mounted at ``/boot/firmware``) on first boot (NoCloud data source). What a
bundle uses, all standard cloud-init modules:

* ``hostname`` / ``manage_etc_hosts``: the actor id, so no two boards answer to the image's
  default ``raspberrypi``;
* ``users`` (only with ``--ssh-key``): an admin login with that key, no password (recent
  images have no default user);
* ``runcmd``: ``install.sh --purge-secrets`` from the bundle on the boot partition (and,
  with ``--ssh-key``, ``systemctl enable --now ssh`` first);
* ``network-config`` (version 2, netplan syntax, rendered by NetworkManager): Wi-Fi;
* ``meta-data``: an ``instance_id`` per board and flash, so that cloud-init runs again on a
  re-flashed card instead of taking it for the instance it already set up.
"""

from __future__ import annotations

import time

import yaml

BOOT_DIR = "/boot/firmware"  # where Raspberry Pi OS mounts the boot partition
BUNDLE_DIR = "edge-rl"  # the bundle's directory on the boot partition


def user_data(actor_id: str, ssh_key: str | None = None, admin_user: str = "edge") -> str:
    doc: dict = {
        "hostname": actor_id,
        "manage_etc_hosts": True,
        "runcmd": [["bash", f"{BOOT_DIR}/{BUNDLE_DIR}/install.sh", "--purge-secrets"]],
    }
    if ssh_key:
        doc["users"] = [
            {
                "name": admin_user,
                "groups": "sudo",
                "shell": "/bin/bash",
                "lock_passwd": True,
                "sudo": "ALL=(ALL) NOPASSWD:ALL",
                "ssh_authorized_keys": [ssh_key.strip()],
            }
        ]
        doc["ssh_pwauth"] = False
        # Raspberry Pi OS ships sshd disabled; a plain runcmd, not an image-specific module.
        doc["runcmd"].insert(0, ["systemctl", "enable", "--now", "ssh"])
    header = (
        "#cloud-config\n"
        f"# edge-rl board {actor_id}: made by edge-rl flash. First boot runs the bundle's\n"
        f"# install.sh from {BOOT_DIR}/{BUNDLE_DIR}/ (docs/boards.md).\n"
    )
    return header + yaml.safe_dump(doc, sort_keys=False)


def network_config(ssid: str, password: str, country: str) -> str:
    if len(country) != 2 or not country.isalpha():
        raise ValueError(
            f"--wifi-country is a two-letter country code (GB, DE, US), not {country!r}"
        )
    doc = {
        "network": {
            "version": 2,
            "renderer": "NetworkManager",
            "ethernets": {"eth0": {"dhcp4": True, "optional": True}},
            "wifis": {
                "wlan0": {
                    "dhcp4": True,
                    "optional": True,
                    "regulatory-domain": country.upper(),
                    "access-points": {ssid: {"password": password}},
                }
            },
        }
    }
    return "# Wi-Fi for an edge-rl board (cloud-init network config version 2)\n" + yaml.safe_dump(
        doc, sort_keys=False
    )


def meta_data(actor_id: str) -> str:
    return f"instance_id: edge-rl-{actor_id}-{int(time.time())}\n"
