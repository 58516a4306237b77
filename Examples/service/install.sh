#!/bin/bash
# Installs BackgroundTransfer for the current user: transferd, bgtransfer and the stand-ins
# (the demo runs them) into PREFIX/bin, the systemd user units into
# PREFIX/share/systemd/user (where the user manager looks for ~/.local), bash, zsh and fish
# completions for bgtransfer, and the man pages transferd(8) and bgtransfer(1). The man
# pages and completions are printed by the installed programs themselves, from their --help.
#
#   install.sh [--prefix DIR] [--from BUILD_DIR] [--allow-root]
#     --prefix DIR      where to install (default ~/.local)
#     --from BUILD_DIR  install these built executables instead of building a release
#                       (e.g. .build/debug); the tests use it, a release build takes minutes
#     --allow-root      run as root all the same (the units are user units, for one user)
# Every installed file is listed in PREFIX/share/backgroundtransfer/installed-files, which
# uninstall.sh reads. A symlink found where a file goes is replaced, never written through,
# and a symlinked folder under PREFIX is refused.
set -euo pipefail

prefix="$HOME/.local"
from=""
allow_root=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --from) from="${2:?--from needs a build directory}"; shift 2 ;;
        --allow-root) allow_root=1; shift ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1" >&2; echo "See 'install.sh --help'." >&2; exit 64 ;;
    esac
done
if [ "$(id -u)" = 0 ] && [ -z "$allow_root" ]; then
    echo "install.sh: refusing to run as root: these are systemd user units, for the user who runs" >&2
    echo "them; run install.sh as that user, or pass --allow-root to install for root itself." >&2
    exit 77
fi
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
case "$prefix" in
    *[\"\'\\]*|*[[:cntrl:]]*)
        # systemd takes no executable path with these (systemd.service(5), "Command lines").
        echo "install.sh: the prefix $prefix holds a quote, a backslash or a control character," \
            "which a systemd unit cannot name" >&2
        exit 64 ;;
esac
prefix="$(realpath -m -- "$prefix")"

# Writes standard input to $1 (mode $2) through a new file in its folder renamed over it:
# whatever is at $1, a symlink planted there included, is replaced, not written through.
write_file() {
    local temporary
    temporary="$(mktemp -- "$(dirname -- "$1")/.install.XXXXXX")"
    cat > "$temporary"
    chmod "$2" "$temporary"
    mv -f -T -- "$temporary" "$1"
}

# $1 as the executable of a systemd command line (systemd.syntax(7), systemd.service(5)
# "Command lines"): quoted when it holds anything but plain path characters (a space, &),
# and % doubled (a specifier otherwise); $ stays, an executable is not expanded. Quotes and
# backslashes, which systemd refuses in an executable's name, are refused above.
systemd_command() {
    case "$1" in
        *[!A-Za-z0-9/._+:,@-]*) ;;
        *) printf '%s' "$1"; return ;;
    esac
    local word="$1"
    word="${word//%/%%}"
    printf '"%s"' "$word"
}

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
folders="bin share/systemd/user share/man/man1 share/man/man8 share/bash-completion/completions
    share/zsh/site-functions share/fish/vendor_completions.d share/backgroundtransfer"
mkdir -p -- "$prefix"
for folder in $folders; do
    # A folder under the prefix that is a symlink would put files elsewhere: refused, before
    # anything is made through it.
    path="$prefix"
    IFS=/ read -r -a parts <<< "$folder"
    for part in "${parts[@]}"; do
        path="$path/$part"
        [ ! -L "$path" ] || { echo "install.sh: $path is a symlink; refusing to install through it" >&2; exit 73; }
        [ -d "$path" ] || mkdir -- "$path"
    done
done
installed=()
put() { installed+=("$1"); }

for program in $programs; do
    write_file "$prefix/bin/$program" 0755 < "$from/$program"
    put "$prefix/bin/$program"
done
shopt -u patsub_replacement 2> /dev/null || true   # bash 5.2: & in a replacement is the match
daemon="$(systemd_command "$prefix/bin/transferd")"
for unit in transferd.socket transferd.service transferd@.socket transferd@.service; do
    text="$(cat "$here/$unit")"
    printf '%s\n' "${text//@BINDIR@\/transferd/"$daemon"}" | write_file "$prefix/share/systemd/user/$unit" 0644
    put "$prefix/share/systemd/user/$unit"
done
"$prefix/bin/transferd" --help-man | write_file "$prefix/share/man/man8/transferd.8" 0644
"$prefix/bin/bgtransfer" --help-man | write_file "$prefix/share/man/man1/bgtransfer.1" 0644
for shell in bash zsh fish; do
    case "$shell" in
        bash) file=bash-completion/completions/bgtransfer ;;
        zsh) file=zsh/site-functions/_bgtransfer ;;
        fish) file=fish/vendor_completions.d/bgtransfer.fish ;;
    esac
    "$prefix/bin/bgtransfer" --completions "$shell" | write_file "$prefix/share/$file" 0644
done
for file in man/man8/transferd.8 man/man1/bgtransfer.1 bash-completion/completions/bgtransfer zsh/site-functions/_bgtransfer fish/vendor_completions.d/bgtransfer.fish; do
    put "$prefix/share/$file"
done
put "$manifest"
printf '%s\n' "${installed[@]}" | write_file "$manifest" 0644

echo "Installed BackgroundTransfer $("$prefix/bin/transferd" --version | cut -d' ' -f2) under $prefix."
echo "Run the daemon of \$HOME/.local/share/BackgroundTransfer as a service:"
echo "  systemctl --user daemon-reload && systemctl --user enable --now transferd.socket"
