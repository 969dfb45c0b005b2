# synth_7b.sh: sourced by the 7B bench scripts. Makes sure the synthetic
# Mistral-7B-shaped model exists (hidden 4096, intermediate 14336, 32 layers,
# 32 heads, 8 kv heads, vocab 32000, sliding_window 4096, rope_theta 10000,
# rms_norm_eps 1e-5; the shapes of mistralai/Mistral-7B-v0.1's config.json)
# as random bf16 safetensors (~14.5 GB) written once by `refgeo synth-model`
# under $REFGEO_HOME/synth/$NAME, and sets DIR to it.
#   in: BUILD; optional REFGEO_HOME, SCALE_NAME, SCALE_CONFIG (another config)
REFGEO_HOME=${REFGEO_HOME:-$HOME/.cache/refgeo}
NAME=${SCALE_NAME:-mistral-7b-shape}
DIR="$REFGEO_HOME/synth/$NAME"
mkdir -p "$REFGEO_HOME/synth"
CONFIG=${SCALE_CONFIG:-"$REFGEO_HOME/synth/$NAME.config.json"}
if [ -z "${SCALE_CONFIG:-}" ]; then
  cat >"$CONFIG" <<'EOF'
{
  "architectures": ["MistralForCausalLM"],
  "model_type": "mistral",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "vocab_size": 32000,
  "max_position_embeddings": 32768,
  "sliding_window": 4096,
  "rope_theta": 10000.0,
  "rms_norm_eps": 1e-05,
  "hidden_act": "silu",
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
}
EOF
fi

# The index (or the single file of a one-shard model) is written last, so
# its presence means the set is complete.
if [ -f "$DIR/model.safetensors.index.json" ] || [ -f "$DIR/model.safetensors" ]; then
  echo "synth_7b: reusing $DIR" >&2
else
  "$BUILD/refgeo" synth-model --config "$CONFIG" --out "$DIR" --seed 0 --max-shard-size 5GB
fi

