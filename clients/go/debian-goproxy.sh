#!/bin/sh
# Usage: debian-goproxy.sh DIR
#
# Builds DIR as a file:// module proxy (GOPROXY=file://DIR) serving each module that go.mod
# requires, made from Debian's golang-*-dev package of it under /usr/share/gocode/src, so the
# tests run in module mode offline. It refuses a module whose Debian version is not the version
# go.mod requires. The zips are Debian's tree, not the upstream zips, so their checksums cannot
# match sum.golang.org: use them with GONOSUMDB for these modules, and a temporary go.sum.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
mkdir -p "$dir"
sed -n -e 's/^require \([^ ]*\) \(v[^ ]*\)$/\1 \2/p' -e 's/^\t\([^ ]*\) \(v[^ ]*\)\( \/\/.*\)\{0,1\}$/\1 \2/p' \
  "$here/go.mod" | while read -r module version; do
  src=/usr/share/gocode/src/$module
  if [ ! -f "$src/go.mod" ] && [ ! -d "$src" ]; then
    echo "debian-goproxy.sh: $module is not installed under /usr/share/gocode (its golang-*-dev package)" >&2
    exit 1
  fi
  package=$(dpkg -S "$src" 2>/dev/null | head -n 1 | cut -d: -f1)
  debian=$(dpkg-query -W -f='${Version}' "$package" 2>/dev/null)
  # Epoch, Debian revision and a repack suffix (1.14.16~ds1-1 is upstream 1.14.16) removed.
  upstream=v$(echo "$debian" | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//' -e 's/[~+]ds[0-9]*$//')
  if [ "$upstream" != "$version" ]; then
    echo "debian-goproxy.sh: go.mod requires $module $version, Debian's $package is $debian" >&2
    exit 1
  fi
  python3 - "$dir" "$module" "$version" "$src" <<'PY'
import json, os, sys, zipfile
root, module, version, src = sys.argv[1:]
# Module paths are case-escaped in a proxy: an upper-case letter becomes '!' + lower case.
escaped = ''.join('!' + c.lower() if c.isupper() else c for c in module)
out = os.path.join(root, escaped, '@v')
os.makedirs(out, exist_ok=True)
mod = os.path.join(src, 'go.mod')
text = open(mod).read() if os.path.exists(mod) else f'module {module}\n'
open(os.path.join(out, version + '.mod'), 'w').write(text)
json.dump({'Version': version, 'Time': '2000-01-01T00:00:00Z'}, open(os.path.join(out, version + '.info'), 'w'))
open(os.path.join(out, 'list'), 'a').write(version + '\n')
with zipfile.ZipFile(os.path.join(out, version + '.zip'), 'w', zipfile.ZIP_DEFLATED) as z:
    for base, dirs, files in os.walk(src):
        # A nested module (a folder with its own go.mod) and vendor folders are not part of it.
        dirs[:] = sorted(d for d in dirs if d != 'vendor' and not d.startswith('.')
                         and not os.path.exists(os.path.join(base, d, 'go.mod')))
        for name in sorted(files):
            path = os.path.join(base, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, src)
            z.write(path, f'{module}@{version}/{rel}')
PY
done
