#!/usr/bin/env bash
# Train configs/transformer/small.cfg's Transformer with OpenNMT-py on CPU for ${STEPS:-100}
# steps and print OpenNMT-py's target tokens/s every 10 steps and the validation loss at the
# end. See README.md beside this file.
set -euo pipefail

PEER_NAME=opennmt
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ONMT_VERSION="${ONMT_VERSION:-3.5.1}"

# 1. virtual environment (never the system Python; common.sh new_venv). OpenNMT-py 3.5.1 (the
#    newest) declares torch<2.3,>=2.1, which only CUDA builds of PyPI satisfy here, so it is
#    installed without its dependencies and they are installed by name, all but torch.
if [[ ! -f "$VENV/.installed" ]]; then
    new_venv
    pip_install sentencepiece configargparse "ctranslate2>=4,<5" "tensorboard>=2.3" flask \
        waitress "pyonmttok>=1.37,<2" pyyaml sacrebleu rapidfuzz pyahocorasick fasttext-wheel \
        spacy six
    pip_install --no-deps "OpenNMT-py==$ONMT_VERSION"
    "$PY" -c "import onmt, torch; print('OpenNMT-py', onmt.__version__, 'torch', torch.__version__)"
    touch "$VENV/.installed"
fi

# 2. data: SentencePiece pieces + the shared 4,000-entry vocabulary (vocab.onmt: the 3,996
#    ordinary pieces; OpenNMT-py adds <unk> <blank> <s> </s>).
"$PY" "$HERE/prepare_data.py" --spm "$SPM_MODEL" --raw "$RAW_DATA" --out "$DATA"

# 3. train: one process (num_workers 0: no data-loader workers), $THREADS torch threads.
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" CUDA_VISIBLE_DEVICES=""
RUN="$WORK/run-steps$STEPS"
rm -rf "$RUN" && mkdir -p "$RUN"
# noam: lr(step) = learning_rate * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), so a peak
# of 1.5e-3 at step 1000 (= tfnmt's InverseSqrtSchedule) needs learning_rate 1.5e-3*sqrt(256*1000).
BUCKET_SIZE="${BUCKET_SIZE:-$(wc -l <"$DATA/train.en")}"
LR="$("$PY" -c 'print(repr(1.5e-3 * (256 * 1000) ** 0.5))')"
cat >"$RUN/config.yaml" <<EOF
save_data: $RUN/data
src_vocab: $DATA/vocab.onmt
share_vocab: true
src_vocab_size: 4000
tgt_vocab_size: 4000
vocab_size_multiple: 8
src_words_min_frequency: 0
tgt_words_min_frequency: 0
data:
  corpus_1:
    path_src: $DATA/train.en
    path_tgt: $DATA/train.de
    transforms: [filtertoolong]
  valid:
    path_src: $DATA/val.en
    path_tgt: $DATA/val.de
src_seq_length: 100
tgt_seq_length: 100
# One bucket = one pass over the corpus (sorted by length, cut into batches, batches shuffled),
# as fairseq does per epoch. The default bucket (262,144 examples) would hold ~9 copies of
# Multi30k's 29,000 pairs and take ~15 s to fill before the first step.
bucket_size: $BUCKET_SIZE

encoder_type: transformer
decoder_type: transformer
enc_layers: 3
dec_layers: 3
hidden_size: 256
word_vec_size: 256
transformer_ff: 1024
heads: 4
layer_norm: standard
norm_eps: 1e-6
pos_ffn_activation_fn: relu
add_qkvbias: true
add_ffnbias: true
position_encoding: true
position_encoding_type: SinusoidalConcat
dropout: [0.3]
attention_dropout: [0.1]
share_embeddings: true
share_decoder_embeddings: true
param_init: 0.0
param_init_glorot: true
model_dtype: fp32

optim: adam
adam_beta1: 0.9
adam_beta2: 0.98
learning_rate: $LR
decay_method: noam
warmup_steps: 1000
max_grad_norm: 0
label_smoothing: 0.1
normalization: tokens
batch_type: tokens
batch_size: 4096
batch_size_multiple: 1
valid_batch_size: 4096
accum_count: [1]
train_steps: $STEPS
valid_steps: $STEPS
report_every: $LOG_EVERY
save_model: $RUN/model
save_checkpoint_steps: $STEPS
keep_checkpoint: 1
seed: 1
num_workers: 0
world_size: 1
EOF
"$PY" - <<'EOF'
import onmt, torch
print(f"OpenNMT-py {onmt.__version__}, torch {torch.__version__}, "
      f"intra-op threads {torch.get_num_threads()}, inter-op threads {torch.get_num_interop_threads()}")
EOF
echo "training $STEPS steps, config $RUN/config.yaml, log in $RUN/train.log"
: >"$RUN/train.log"
"$VENV/bin/onmt_train" -config "$RUN/config.yaml" >"$RUN/train.log" 2>&1 &
TRAIN_PID=$!
# Stream the per-interval figures while it trains. OpenNMT-py's report line ends with
# "SRC/TGT tok/s": source and target (non-padding) tokens per second over the interval.
tail -n +1 -f --pid="$TRAIN_PID" "$RUN/train.log" | awk '
    /Step .*tok\/s/ {
        step = $0; sub(/.*Step +/, "", step); sub(/[;\/].*/, "", step)
        xent = $0; sub(/.*xent: */, "", xent); sub(/;.*/, "", xent)
        toks = $0; sub(/ tok\/s.*/, "", toks); sub(/.*; */, "", toks)
        split(toks, st, "/")
        printf "opennmt step %5s  target tokens/s %8s  (source %s)  train xent %s (nats)\n",
               step, st[2], st[1], xent
        fflush()
    }'
if ! wait "$TRAIN_PID"; then
    echo "onmt_train failed; last lines of $RUN/train.log:" >&2
    tail -n 30 "$RUN/train.log" >&2
    exit 1
fi

# OpenNMT-py always saves the model at the end (fairseq runs with --no-save): drop it.
[[ -n "${KEEP_CHECKPOINT:-}" ]] || rm -f "$RUN"/model_step_*.pt

# OpenNMT-py prints the validation perplexity (exp of the label-smoothed cross-entropy per
# target token, in nats) and accuracy.
ppl="$(grep -E "Validation perplexity:" "$RUN/train.log" | tail -n 1 | sed 's/.*Validation perplexity: *//')"
acc="$(grep -E "Validation accuracy:" "$RUN/train.log" | tail -n 1 | sed 's/.*Validation accuracy: *//')"
[[ -n "$ppl" ]] || { echo "no validation line in $RUN/train.log" >&2; exit 1; }
awk -v ppl="$ppl" -v acc="$acc" -v steps="$STEPS" 'BEGIN {
    printf "opennmt validation after %s steps: loss %.4f nats = %.4f bits (label-smoothed; ppl %s, accuracy %s%%)\n",
           steps, log(ppl), log(ppl) / log(2), ppl, acc
}'
