# Sourced by fairseq.sh and opennmt.sh after setting PEER_NAME: the settings both share, the
# toolkit's virtual environment, data and work directories, and a quiet pip.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# Beside the repository, as ../shared is: venvs, data and logs, never inside the repository.
PEER_DIR="${PEER_DIR:-$(cd "$REPO/.." && pwd)/peer}"
STEPS="${STEPS:-100}"
THREADS="${THREADS:-2}"
LOG_EVERY="${LOG_EVERY:-10}"
# What `tfnmt vocab --flagfile=configs/transformer/small.cfg` writes (its --model_dir).
SPM_MODEL="${SPM_MODEL:-$REPO/runs/transformer-small-en-de/spm.model}"
RAW_DATA="${RAW_DATA:-$(cd "$REPO/.." && pwd)/shared/data/multi30k}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"

VENV="$PEER_DIR/venv-$PEER_NAME"
DATA="$PEER_DIR/data"
WORK="$PEER_DIR/$PEER_NAME"
PY="$VENV/bin/python"

pip_install() {  # quiet; the full output goes to $VENV/install.log
    "$PY" -m pip install "$@" >>"$VENV/install.log" 2>&1 \
        || { tail -n 30 "$VENV/install.log" >&2; echo "pip install $* failed" >&2; exit 1; }
}

# The venv with torch first, pinned, so that nothing installed after it pulls another (CUDA)
# build of torch; the toolkit's own packages follow in its script.
new_venv() {
    [[ -x "$PY" ]] || python3 -m venv "$VENV"
    echo "installing into $VENV (log: $VENV/install.log)"
    pip_install --upgrade pip setuptools wheel
    pip_install "torch==$TORCH_VERSION"
}
