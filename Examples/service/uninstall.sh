#!/bin/bash
# Removes what install.sh installed under PREFIX (default ~/.local), as its list of
# installed files says, after stopping and disabling the default container's units when a
# user manager runs. Containers and their transfers are left alone.
#
#   uninstall.sh [--prefix DIR]
set -euo pipefail

prefix="$HOME/.local"
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "uninstall.sh: unknown argument $1" >&2; echo "See 'uninstall.sh --help'." >&2; exit 64 ;;
    esac
done
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
manifest="$prefix/share/backgroundtransfer/installed-files"
[ -f "$manifest" ] || { echo "uninstall.sh: nothing installed under $prefix (no $manifest)" >&2; exit 66; }

if command -v systemctl > /dev/null && systemctl --user is-system-running > /dev/null 2>&1; then
    systemctl --user disable --now transferd.socket transferd.service > /dev/null 2>&1 || true
fi
while IFS= read -r file; do
    case "$file" in "$prefix"/*) rm -f -- "$file" ;; esac   # only files under the prefix
done < "$manifest"
rmdir "$prefix/share/backgroundtransfer" 2> /dev/null || true
if command -v systemctl > /dev/null && systemctl --user is-system-running > /dev/null 2>&1; then
    systemctl --user daemon-reload || true
fi
echo "Removed BackgroundTransfer from $prefix."
