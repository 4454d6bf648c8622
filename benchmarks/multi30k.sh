#!/usr/bin/env bash
# Multi30k En->De, scored on test_2016_flickr with sacreBLEU: regular vs area
# attention for the Transformer (transformer_small, width 3 in the first 2
# layers) and the LSTM (256 cells x 4 heads, width 2), same batches, same steps.
#
#   bash benchmarks/multi30k.sh record          # where TensorFlow is (a CPU will do)
#   bash benchmarks/multi30k.sh train RUN...    # anywhere, e.g. KERAS_BACKEND=jax on a GPU
#
# `record` writes the vocabulary and the exact training batches once (the
# recipe's tf.data pipeline); every run then replays the same batches
# (`train --recorded`, no TensorFlow needed), averages its last 5 checkpoints
# and decodes the test set with beam 4, alpha 0.6. RUN is one of
# transformer_small transformer_small_area lstm_seq2seq_256_h4
# lstm_seq2seq_256_h4_area (default: all four, one after another).
# Environment: DATA (the Multi30k raw folder), OUT_DIR, STEPS.
set -euo pipefail

DATA=${DATA:?set DATA to the Multi30k raw folder (train.en.gz, val.en.gz, test_2016_flickr.en.gz, ...)}
OUT_DIR=${OUT_DIR:-runs/multi30k}
STEPS=${STEPS:-5000}
PYTHON=${PYTHON:-python}
RUNS=(transformer_small transformer_small_area lstm_seq2seq_256_h4 lstm_seq2seq_256_h4_area)
COMMON=(
  --hparams "batch_size=4096,max_length=64,learning_rate_warmup_steps=1000"
  --vocab_size 8000 --train_steps "$STEPS" --steps_per_checkpoint 250 --seed 1
  --test_source "$DATA/test_2016_flickr.en.gz" --test_target "$DATA/test_2016_flickr.de.gz"
  --beam_size 4 --alpha 0.6 --decode_batch_size 128 --verbose 2
)

case "${1:-}" in
  record)
    $PYTHON -m recipes.translate record --output_dir "$OUT_DIR/record" \
      --hparams_set transformer_small "${COMMON[@]}" \
      --train_source "$DATA/train.en.gz" --train_target "$DATA/train.de.gz" \
      --dev_source "$DATA/val.en.gz" --dev_target "$DATA/val.de.gz"
    for run in "${RUNS[@]}"; do
      mkdir -p "$OUT_DIR/$run"
      cp -r "$OUT_DIR"/record/vocab.* "$OUT_DIR/record/recorded" "$OUT_DIR/$run/"
    done
    ;;
  train)
    shift
    for run in "${@:-${RUNS[@]}}"; do
      $PYTHON -m recipes.translate train --recorded --no_eval \
        --output_dir "$OUT_DIR/$run" --hparams_set "$run" "${COMMON[@]}"
      $PYTHON -m recipes.translate average --last 5 \
        --output_dir "$OUT_DIR/$run" --hparams_set "$run" "${COMMON[@]}"
      $PYTHON -m recipes.translate evaluate \
        --output_dir "$OUT_DIR/$run" --hparams_set "$run" "${COMMON[@]}"
    done
    ;;
  *)
    sed -n '2,15p' "$0"
    exit 2
    ;;
esac
