#!/usr/bin/env bash
# Train configs/transformer/small.cfg's Transformer with fairseq (PyPI fairseq-fixed) on CPU for
# ${STEPS:-100} updates and print fairseq's target tokens/s (wps) every 10 updates and the
# validation loss at the end. See README.md beside this file.
set -euo pipefail

PEER_NAME=fairseq
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
FAIRSEQ_VERSION="${FAIRSEQ_VERSION:-0.12.3.1}"

# 1. virtual environment (never the system Python; common.sh new_venv). fairseq-fixed is
#    installed without its dependencies: it asks for torchaudio, whose newest release pins an older
#    torch and which text translation does not use; its other dependencies are installed by name.
#    Built against the venv's torch (no build isolation, which would fetch a torch of its own).
if [[ ! -f "$VENV/.installed" ]]; then
    new_venv
    pip_install cython numpy sentencepiece
    pip_install cffi "hydra-core==1.3.2" "omegaconf==2.3.0" regex "sacrebleu>=1.4.12" tqdm \
        bitarray scikit-learn packaging
    pip_install --no-deps --no-build-isolation "fairseq-fixed==$FAIRSEQ_VERSION"
    "$PY" -c "import fairseq, torch; print('fairseq', fairseq.__version__, 'torch', torch.__version__)"
    touch "$VENV/.installed"
fi

# 2. data: SentencePiece pieces + the shared 4,000-entry vocabulary, then fairseq's binary files.
"$PY" "$HERE/prepare_data.py" --spm "$SPM_MODEL" --raw "$RAW_DATA" --out "$DATA"
BIN="$WORK/data-bin"
if [[ ! -f "$BIN/.done" ]]; then
    rm -rf "$BIN" && mkdir -p "$WORK"
    "$VENV/bin/fairseq-preprocess" --source-lang en --target-lang de \
        --trainpref "$DATA/train" --validpref "$DATA/val" --destdir "$BIN" \
        --srcdict "$DATA/dict.txt" --joined-dictionary --workers 1 >"$WORK/preprocess.log" 2>&1 \
        || { cat "$WORK/preprocess.log"; exit 1; }
    touch "$BIN/.done"
fi

# 3. train: one process (--num-workers 0: no data-loader workers), $THREADS torch threads.
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" CUDA_VISIBLE_DEVICES=""
RUN="$WORK/run-steps$STEPS"
rm -rf "$RUN" && mkdir -p "$RUN"
"$PY" - <<'EOF'
import fairseq, torch
print(f"fairseq {fairseq.__version__}, torch {torch.__version__}, "
      f"intra-op threads {torch.get_num_threads()}, inter-op threads {torch.get_num_interop_threads()}")
EOF
echo "training $STEPS updates, log in $RUN/train.log"
: >"$RUN/train.log"

"$VENV/bin/fairseq-train" "$BIN" \
    --task translation --source-lang en --target-lang de \
    --arch transformer \
    --encoder-layers 3 --decoder-layers 3 \
    --encoder-embed-dim 256 --decoder-embed-dim 256 \
    --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024 \
    --encoder-attention-heads 4 --decoder-attention-heads 4 \
    --encoder-normalize-before --decoder-normalize-before \
    --dropout 0.3 --attention-dropout 0.1 --activation-dropout 0.1 \
    --share-all-embeddings \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
    --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-9 --weight-decay 0 \
    --lr 1.5e-3 --lr-scheduler inverse_sqrt --warmup-updates 1000 --warmup-init-lr 0 \
    --clip-norm 0 \
    --max-tokens 4096 --max-source-positions 100 --max-target-positions 100 \
    --skip-invalid-size-inputs-valid-test \
    --max-update "$STEPS" --seed 1 \
    --cpu --num-workers 0 \
    --log-format simple --log-interval "$LOG_EVERY" \
    --no-save --save-dir "$RUN/checkpoints" \
    >"$RUN/train.log" 2>&1 &
TRAIN_PID=$!
# Stream the per-interval figures while it trains.
tail -n +1 -f --pid="$TRAIN_PID" "$RUN/train.log" | awk '
    / train_inner / || /\| train_inner \|/ {
        upd = wps = loss = ""
        n = split($0, f, /[ ,]+/)
        for (i = 1; i <= n; i++) {
            if (f[i] ~ /^num_updates=/) upd = substr(f[i], 13)
            if (f[i] ~ /^wps=/) wps = substr(f[i], 5)
            if (f[i] ~ /^loss=/) loss = substr(f[i], 6)
        }
        printf "fairseq update %5s  target tokens/s (wps) %8s  train loss %s (base 2)\n", upd, wps, loss
        fflush()
    }'
if ! wait "$TRAIN_PID"; then
    echo "fairseq-train failed; last lines of $RUN/train.log:" >&2
    tail -n 30 "$RUN/train.log" >&2
    exit 1
fi

# fairseq reports losses in bits (log base 2); nats = bits * ln 2.
grep -E "valid on 'valid' subset" "$RUN/train.log" | tail -n 1 | awk '{
    loss = nll = upd = ""
    n = split($0, f, / *\| */)
    for (i = 1; i <= n; i++) {
        split(f[i], kv, " ")
        if (kv[1] == "loss") loss = kv[2]
        if (kv[1] == "nll_loss") nll = kv[2]
        if (kv[1] == "num_updates") upd = kv[2]
    }
    if (loss == "") { print "no validation line found"; exit 1 }
    printf "fairseq validation after %s updates: loss %s bits = %.4f nats (label-smoothed); nll_loss %s bits = %.4f nats\n",
           upd, loss, loss * log(2), nll, nll * log(2)
}'
