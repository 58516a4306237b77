#!/bin/bash
# Installs BackgroundTransfer for the current user: transferd, bgtransfer and the stand-ins
# (the demo runs them) into PREFIX/bin, the systemd user units into
# PREFIX/share/systemd/user (where the user manager looks for ~/.local), bash, zsh and fish
# completions for bgtransfer, and the man pages transferd(8) and bgtransfer(1). The man
# pages and completions are printed by the installed programs themselves, from their --help.
#
#   install.sh [--prefix DIR] [--from BUILD_DIR]
#     --prefix DIR      where to install (default ~/.local)
#     --from BUILD_DIR  install these built executables instead of building a release
#                       (e.g. .build/debug); the tests use it, a release build takes minutes
# Every installed file is listed in PREFIX/share/backgroundtransfer/installed-files, which
# uninstall.sh reads.
set -euo pipefail

prefix="$HOME/.local"
from=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --from) from="${2:?--from needs a build directory}"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1" >&2; echo "See 'install.sh --help'." >&2; exit 64 ;;
    esac
done
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac

here="$(cd "$(dirname "$0")" && pwd)"
repository="$(cd "$here/../.." && pwd)"
programs="transferd bgtransfer host-app fetch-extension share-extension"
if [ -z "$from" ]; then
    (cd "$repository" && swift build -c release $(for p in $programs; do printf -- '--product %s ' "$p"; done))
    from="$(cd "$repository" && swift build -c release --show-bin-path)"
fi
for program in $programs; do
    [ -x "$from/$program" ] || { echo "install.sh: $from/$program is not an executable (build it, or give --from)" >&2; exit 66; }
done

manifest_dir="$prefix/share/backgroundtransfer"
manifest="$manifest_dir/installed-files"
mkdir -p "$prefix/bin" "$prefix/share/systemd/user" "$prefix/share/man/man1" "$prefix/share/man/man8" \
    "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d" "$manifest_dir"
: > "$manifest"
put() { echo "$1" >> "$manifest"; }

for program in $programs; do
    install -m 0755 "$from/$program" "$prefix/bin/$program"
    put "$prefix/bin/$program"
done
for unit in transferd.socket transferd.service transferd@.socket transferd@.service; do
    sed "s|@BINDIR@|$prefix/bin|g" "$here/$unit" > "$prefix/share/systemd/user/$unit"
    chmod 0644 "$prefix/share/systemd/user/$unit"
    put "$prefix/share/systemd/user/$unit"
done
"$prefix/bin/transferd" --help-man > "$prefix/share/man/man8/transferd.8"
"$prefix/bin/bgtransfer" --help-man > "$prefix/share/man/man1/bgtransfer.1"
"$prefix/bin/bgtransfer" --completions bash > "$prefix/share/bash-completion/completions/bgtransfer"
"$prefix/bin/bgtransfer" --completions zsh > "$prefix/share/zsh/site-functions/_bgtransfer"
"$prefix/bin/bgtransfer" --completions fish > "$prefix/share/fish/vendor_completions.d/bgtransfer.fish"
for file in man/man8/transferd.8 man/man1/bgtransfer.1 bash-completion/completions/bgtransfer zsh/site-functions/_bgtransfer fish/vendor_completions.d/bgtransfer.fish; do
    put "$prefix/share/$file"
done
put "$manifest"

echo "Installed BackgroundTransfer $("$prefix/bin/transferd" --version | cut -d' ' -f2) under $prefix."
echo "Run the daemon of \$HOME/.local/share/BackgroundTransfer as a service:"
echo "  systemctl --user daemon-reload && systemctl --user enable --now transferd.socket"
