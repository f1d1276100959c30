#!/bin/sh
# Regenerates what is written from the config key table (src/train/config_schema.cpp) into files
# in the repository: configs/tiny.toml and the README's key table (between the config-keys
# markers). test_config's ConfigFiles tests fail until this is run after a change to the table.
# Build first (scripts/build.sh); MESHTRAIN=path/to/meshtrain to use another binary.
set -eu
cd "$(dirname "$0")/.."
bin=${MESHTRAIN:-build/meshtrain}
grep -q '^<!-- config-keys:begin -->$' README.md && grep -q '^<!-- config-keys:end -->$' README.md || {
  echo "README.md lacks the <!-- config-keys:begin --> / <!-- config-keys:end --> lines" >&2
  exit 1
}
table=$(mktemp)
trap 'rm -f "$table" README.md.new configs/tiny.toml.new' EXIT
"$bin" train --print-default-config > configs/tiny.toml.new
"$bin" train --print-config-table > "$table"
awk -v table="$table" '
  /^<!-- config-keys:end -->$/ { skipping = 0 }
  !skipping { print }
  /^<!-- config-keys:begin -->$/ { while ((getline line < table) > 0) print line; skipping = 1 }
' README.md > README.md.new
mv configs/tiny.toml.new configs/tiny.toml
mv README.md.new README.md
echo "updated configs/tiny.toml and README.md's config key table"
