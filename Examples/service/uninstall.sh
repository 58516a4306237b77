#!/bin/bash
# Removes what install.sh installed under PREFIX (default ~/.local), as its list of
# installed files says, after stopping and disabling the default container's units when a
# user manager runs. Containers and their transfers are left alone.
#
# A listed file is removed only when it is under PREFIX, named without . or .. and reached
# without a symlinked folder; others are named on stderr, and the exit status is then 65.
#
#   uninstall.sh [--prefix DIR] [--allow-root]
set -euo pipefail

prefix="$HOME/.local"
allow_root=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --allow-root) allow_root=1; shift ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "uninstall.sh: unknown argument $1" >&2; echo "See 'uninstall.sh --help'." >&2; exit 64 ;;
    esac
done
if [ "$(id -u)" = 0 ] && [ -z "$allow_root" ]; then
    echo "uninstall.sh: refusing to run as root: these are systemd user units, for the user who" >&2
    echo "runs them; run uninstall.sh as that user, or pass --allow-root to remove root's own." >&2
    exit 77
fi
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
prefix="$(realpath -m -- "$prefix")"   # as install.sh wrote it into the list
manifest="$prefix/share/backgroundtransfer/installed-files"
[ -f "$manifest" ] || { echo "uninstall.sh: nothing installed under $prefix (no $manifest)" >&2; exit 66; }

if command -v systemctl > /dev/null && systemctl --user is-system-running > /dev/null 2>&1; then
    systemctl --user disable --now transferd.socket transferd.service > /dev/null 2>&1 || true
fi
refused=0
while IFS= read -r file; do
    # Only files under the prefix, named as realpath names them (no ., .., //), whose folder
    # is reached without a symlink: a list any program of the user could edit removes
    # nothing else.
    folder="$(dirname -- "$file")"
    case "$file" in
        "$prefix"/*)
            if [ "$(realpath -m -s -- "$file")" = "$file" ] && [ "$(realpath -m -- "$folder")" = "$folder" ]; then
                rm -f -- "$file"
                continue
            fi ;;
    esac
    echo "uninstall.sh: not removing $file: it is not a file under $prefix" >&2
    refused=1
done < "$manifest"
rmdir "$prefix/share/backgroundtransfer" 2> /dev/null || true
if command -v systemctl > /dev/null && systemctl --user is-system-running > /dev/null 2>&1; then
    systemctl --user daemon-reload || true
fi
echo "Removed BackgroundTransfer from $prefix."
[ "$refused" = 0 ] || exit 65
