#!/usr/bin/env bash
# Checks the Debian package scripts/package.sh builds (scripts/test.sh runs it):
#   - reproducible: a second build from a copy of the tree (another path, fresh mtimes, no
#     .git: the version, commit and time given as the first build took them) is
#     byte-identical (sha256);
#   - its contents (dpkg-deb -c: paths, modes, owners) and conffiles are the expected
#     ones: the binaries in /usr/bin, the units, the sysusers.d file, the root-only
#     environment files; nothing under /usr/local, no unit enabled;
#   - lintian (errors and warnings) is clean, the package's overrides aside;
#   - `dpkg --root` installs it into a throw-away root, never into this machine: its
#     postinst creates the two users there, the units are disabled, the installed binaries
#     print the stamped version and commit; a purge removes the environment files.
# Both builds share Go's build cache: the second compiles nothing, so this costs two links
# and two nfpm runs (about half a minute on 2 cores once the cache is warm).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "package-check: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing (Debian's dpkg package)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- two builds, byte for byte ---------------------------------------------------------
deb=$(scripts/package.sh -o "$work/one")
set -a
. bin/stage/stamp.env
set +a
mkdir "$work/copy"
# The tracked and untracked-but-not-ignored files as they are now (uncommitted edits too).
git ls-files -z --cached --others --exclude-standard |
	tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$work/copy"
again=$(cd "$work/copy" && scripts/package.sh -o "$work/two")
[ "$(basename "$deb")" = "$(basename "$again")" ] || fail "the second build is named $(basename "$again"), the first $(basename "$deb")"
sum1=$(sha256sum <"$deb" | cut -d' ' -f1)
sum2=$(sha256sum <"$again" | cut -d' ' -f1)
if [ "$sum1" != "$sum2" ]; then
	diff <(dpkg-deb -c "$deb") <(dpkg-deb -c "$again") >&2 || true
	fail "two builds of $(basename "$deb") differ ($sum1, $sum2): compare them with diffoscope"
fi
echo "package-check: two builds are byte-identical: $(basename "$deb") sha256 $sum1"

# --- contents ----------------------------------------------------------------------------
want=$(cat <<'CONTENTS'
drwxr-xr-x root/root ./etc/
drwxr-xr-x root/root ./etc/apelora/
-rw------- root/root ./etc/apelora/apelora.env
-rw------- root/root ./etc/apelora/worker.env
drwxr-xr-x root/root ./usr/
drwxr-xr-x root/root ./usr/bin/
-rwxr-xr-x root/root ./usr/bin/apelora
-rwxr-xr-x root/root ./usr/bin/apelora-worker
-rwxr-xr-x root/root ./usr/bin/apeloractl
drwxr-xr-x root/root ./usr/lib/
drwxr-xr-x root/root ./usr/lib/systemd/
drwxr-xr-x root/root ./usr/lib/systemd/system/
-rw-r--r-- root/root ./usr/lib/systemd/system/apelora-worker.service
-rw-r--r-- root/root ./usr/lib/systemd/system/apelora.service
drwxr-xr-x root/root ./usr/lib/sysusers.d/
-rw-r--r-- root/root ./usr/lib/sysusers.d/apelora.conf
drwxr-xr-x root/root ./usr/share/
drwxr-xr-x root/root ./usr/share/doc/
drwxr-xr-x root/root ./usr/share/doc/apelora/
-rw-r--r-- 0/0 ./usr/share/doc/apelora/changelog.Debian.gz
-rw-r--r-- root/root ./usr/share/doc/apelora/copyright
drwxr-xr-x root/root ./usr/share/lintian/
drwxr-xr-x root/root ./usr/share/lintian/overrides/
-rw-r--r-- root/root ./usr/share/lintian/overrides/apelora
CONTENTS
)
got=$(dpkg-deb -c "$deb" | awk '{print $1, $2, $6}')
[ "$got" = "$want" ] || fail "the package's contents changed (update the list here if that was meant):
$(diff <(echo "$want") <(echo "$got") | grep '^[<>]')"
conffiles=$(dpkg-deb -I "$deb" conffiles)
[ "$conffiles" = $'/etc/apelora/apelora.env\n/etc/apelora/worker.env' ] ||
	fail "conffiles are not the two environment files: $conffiles"
# The packaged units run what the package installs.
for unit in apelora apelora-worker; do
	grep -qx "ExecStart=/usr/bin/$unit\( serve\)\?" "deploy/systemd/$unit.service" ||
		fail "deploy/systemd/$unit.service does not start /usr/bin/$unit, which the package installs"
done
echo "package-check: contents and conffiles are as expected"

# --- lintian -------------------------------------------------------------------------------
if command -v lintian >/dev/null; then
	if ! out=$(lintian --fail-on error,warning "$deb" 2>&1); then
		echo "$out" | grep -v '^running with root privileges' >&2
		fail "lintian reports errors or warnings (above): fix them, or override one in deploy/debian/lintian-overrides with the reason"
	fi
	echo "package-check: lintian is clean (deploy/debian/lintian-overrides says why for each override)"
elif [ "${CI:-}" = true ]; then
	fail "lintian is missing: run scripts/install-deps.sh"
else
	echo "package-check: SKIPPED LOUDLY: lintian is missing (scripts/install-deps.sh installs it)" >&2
fi

# --- install into a throw-away root --------------------------------------------------------
# --force-script-chrootless: the maintainer scripts run here with DPKG_ROOT set (the root
# has no shell to chroot into), and postinst hands it to systemd-sysusers --root.
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
in_root() { dpkg --root="$root" --force-script-chrootless --log=/dev/null "$@"; }
in_root -i "$deb" >"$work/dpkg.log" 2>&1 || fail "dpkg -i into a throw-away root failed:
$(cat "$work/dpkg.log")"
status=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${Status} ${Version}' apelora)
[ "$status" = "install ok installed $APELORA_VERSION-$APELORA_REVISION" ] || fail "installed as \"$status\""
for user in apelora apelora-worker; do
	grep -q "^$user:" "$root/etc/passwd" || fail "postinst did not create the user $user (systemd-sysusers)"
done
for unit in apelora.service apelora-worker.service; do
	state=$(systemctl --root="$root" is-enabled "$unit" 2>&1 || true)
	[ "$state" = disabled ] || fail "$unit is \"$state\" after installing: installing must start nothing"
done
[ -z "$(find "$root/etc" -name '*.wants' -print -quit)" ] || fail "installing enabled a unit"
mode=$(stat -c '%a %U:%G' "$root/etc/apelora/apelora.env")
[ "$mode" = "600 root:root" ] || fail "/etc/apelora/apelora.env is $mode once installed, not 600 root:root"
for program in apelora apelora-worker apeloractl; do
	line=$(env -i "$root/usr/bin/$program" version)
	[ "$line" = "$program $APELORA_VERSION (commit $APELORA_COMMIT)" ] ||
		fail "the installed $program says \"$line\", not version $APELORA_VERSION and commit $APELORA_COMMIT"
done
in_root --purge apelora >"$work/dpkg.log" 2>&1 || fail "dpkg --purge in the throw-away root failed:
$(cat "$work/dpkg.log")"
[ ! -e "$root/etc/apelora/apelora.env" ] && [ ! -e "$root/usr/bin/apelora" ] ||
	fail "a purge left the package's files behind"
echo "package-check: dpkg installs it into a throw-away root (users created, units disabled, version $APELORA_VERSION, commit $APELORA_COMMIT) and purges it"
