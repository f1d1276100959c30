#!/bin/sh
# Regenerates what is written from the config key table (src/train/config_schema.cpp) into files
# in the repository: configs/tiny.toml and docs/configuration.md's key table (between the
# config-keys markers). test_config's ConfigFiles tests fail until this is run after a change to
# the table. Build first (scripts/build.sh); MESHTRAIN=path/to/meshtrain to use another binary.
set -eu
cd "$(dirname "$0")/.."
bin=${MESHTRAIN:-build/meshtrain}
doc=docs/configuration.md
grep -q '^<!-- config-keys:begin -->$' "$doc" && grep -q '^<!-- config-keys:end -->$' "$doc" || {
  echo "$doc lacks the <!-- config-keys:begin --> / <!-- config-keys:end --> lines" >&2
  exit 1
}
table=$(mktemp)
trap 'rm -f "$table" "$doc.new" configs/tiny.toml.new' EXIT
"$bin" train --print-default-config > configs/tiny.toml.new
"$bin" train --print-config-table > "$table"
awk -v table="$table" '
  /^<!-- config-keys:end -->$/ { skipping = 0 }
  !skipping { print }
  /^<!-- config-keys:begin -->$/ { while ((getline line < table) > 0) print line; skipping = 1 }
' "$doc" > "$doc.new"
mv configs/tiny.toml.new configs/tiny.toml
mv "$doc.new" "$doc"
echo "updated configs/tiny.toml and $doc's config key table"
