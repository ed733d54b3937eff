#!/usr/bin/env bash
# Installs the Debian packages the app and its tests need (Qt's offscreen platform, QtWebEngine,
# a private Secret Service for the real keyring, GLib's launcher to run an autostart
# entry). Does nothing when all are present.
set -euo pipefail
pkgs=(dbus gnome-keyring libsecret-1-0 libegl1 libgl1 libxkbcommon0 libfontconfig1
      fonts-dejavu-core libglib2.0-0 libglib2.0-bin libdbus-1-3 libxcb-cursor0
      # Qt's xcb platform, for the window on an X display (make run on a desktop)
      libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-render-util0 libxcb-xinerama0
      libxcb-xkb1 libxkbcommon-x11-0 libxcb-randr0 libxcb-shape0
      # QtWebEngine (PySide6-Addons), for tools' app views: what its libraries and its
      # QtWebEngineProcess link that a minimal Debian lacks
      libnss3 libnspr4 libasound2 libxcomposite1 libxdamage1 libxrandr2 libxtst6 libxkbfile1
      libgbm1 libdrm2 libxcb-dri3-0 libxfixes3 libxrender1)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]} (run as root or install them)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
