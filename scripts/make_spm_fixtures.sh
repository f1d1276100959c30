#!/usr/bin/env bash
# Rebuilds the sentencepiece fixtures in tests/data/sentencepiece/ (committed; rerun only to
# change them). Needs Debian's `sentencepiece` (spm_train) and `python3-sentencepiece`.
#
#   llama_bpe1000.model  a Llama-2-like BPE model: byte_fallback, split_digits, identity
#                        normalization, dummy prefix, whitespace kept (remove_extra_whitespaces
#                        false) and whitespace-only pieces, as Llama 2 / Mistral / TinyLlama's
#   squeeze_bpe400.model sentencepiece's default whitespace handling instead (extra whitespace
#                        removed) and a user-defined symbol, to cover those paths
#   reference_ids.json   python3-sentencepiece's ids for a corpus of tricky strings on both
#                        models and on llama2.c's tok512.model (scripts/spm_reference_ids.py)
#
# Both are trained on the first 200,000 bytes of ../shared/data/text/tinyshakespeare.txt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=tests/data/sentencepiece
SHARED=${SHARED:-../shared/data}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
head -c 200000 "$SHARED/text/tinyshakespeare.txt" > "$TMP/corpus.txt"
common=(--input="$TMP/corpus.txt" --model_type=bpe --byte_fallback=true --split_digits=true
        --normalization_rule_name=identity --character_coverage=1.0 --num_threads=1
        --minloglevel=2)
spm_train "${common[@]}" --model_prefix="$TMP/llama_bpe1000" --vocab_size=1000 \
  --add_dummy_prefix=true --remove_extra_whitespaces=false --allow_whitespace_only_pieces=true
spm_train "${common[@]}" --model_prefix="$TMP/squeeze_bpe400" --vocab_size=400 \
  --user_defined_symbols='<sep>'
cp "$TMP/llama_bpe1000.model" "$TMP/squeeze_bpe400.model" "$OUT/"
/usr/bin/python3 scripts/spm_reference_ids.py "$OUT/llama_bpe1000.model" "$OUT/squeeze_bpe400.model" \
  "$SHARED/stories260K/tok512.model" > "$OUT/reference_ids.json"
ls -l "$OUT"
