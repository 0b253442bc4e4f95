#!/bin/bash

# --- Environment Setup ---
# This script requires uv and a Python 3.11 virtual environment with xpk installed.
# If you haven't set up uv and the environment, please refer to the README.md.

UV_VENV_PATH="${HOME}/.local/bin/venv"
UV_PYTHON_VERSION="3.11"

# Activate the virtual environment
source "${UV_VENV_PATH}/bin/activate"

# Check if xpk is installed in the venv
if ! pip show xpk &> /dev/null; then
    echo "xpk not found in the virtual environment. Please install it by running:"
    echo "pip install xpk==0.16.1"
    exit 1
fi
# --- End Environment Setup ---

# --- Configuration ---
# Before running this script, please modify the environment variables below
# to match your specific GCP project and cluster setup.
# ---

# --- Environment Variables ---
export PROJECT_ID=""
export CLUSTER_NAME=""
export ZONE=""
export BASE_OUTPUT_DIR=""
export WORKLOAD_IMAGE=""
export WORKLOAD_NAME="$(printf "%.26s" "${USER//_/-}-qwen3-235b-a22b-4096-fsdp-4x8x8-fp8")-$(date +%Y%m%d-%H%M)"

# XLA Flags
XLA_FLAGS=" \
  --xla_tpu_scoped_vmem_limit_kib=61440 \
  --xla_tpu_enable_sparse_core_collective_offload_all_gather=true \
  --xla_tpu_enable_sparse_core_collective_offload_all_reduce=true \
  --xla_tpu_use_single_sparse_core_for_all_gather_offload=true \
  --xla_tpu_enable_all_experimental_scheduler_features=true \
  --xla_tpu_enable_scheduler_memory_pressure_tracking=true \
  --xla_tpu_host_transfer_overlap_limit=24 \
  --xla_tpu_aggressive_opt_barrier_removal=ENABLED \
  --xla_lhs_prioritize_async_depth_over_stall=ENABLED \
  --xla_tpu_enable_ag_backward_pipelining=true \
  --xla_should_allow_loop_variant_parameter_in_chain=ENABLED \
  --xla_should_add_loop_invariant_op_in_chain=ENABLED \
  --xla_max_concurrent_host_send_recv=100 \
  --xla_tpu_scheduler_percent_shared_memory_limit=100 \
  --xla_latency_hiding_scheduler_rerun=2 "

# MaxText Workload Overrides
MAXTEXT_ARGS="\
model_name=qwen3-235b-a22b \
per_device_batch_size=16.0 \
max_target_length=4096 \
skip_jax_distributed_system=True \
dtype=bfloat16 \
weight_dtype=float32 \
opt_type=adamw \
steps=20 \
profiler=xplane \
skip_first_n_steps_for_profiler=5 \
profiler_steps=3 \
profile_periodically_period=10000 \
async_checkpointing=False \
enable_checkpointing=False \
remat_policy=custom \
decoder_layer_input=offload \
use_custom_sort_vjp=True \
use_random_routing=True \
fsdp_shard_on_exp=False \
megablox=False \
sparse_matmul=True \
use_tokamax_gmm=True \
use_tokamax_splash=True \
sa_use_fused_bwd_kernel=True \
attention=flash \
sa_block_q=1024 \
sa_block_kv=1024 \
sa_block_kv_compute=512 \
sa_block_q_dkv=2048 \
sa_block_kv_dkv=2048 \
sa_block_kv_dkv_compute=1024 \
sa_block_q_dq=1024 \
sa_block_kv_dq=1024 \
sa_q_layout=HEAD_DIM_MINOR \
sa_k_layout=SEQ_MINOR \
sa_v_layout=HEAD_DIM_MINOR \
dcn_pipeline_parallelism=1 \
dcn_data_parallelism=-1 \
ici_pipeline_parallelism=1 \
ici_fsdp_transpose_parallelism=1 \
ici_fsdp_parallelism=-1 \
use_qwix_quantization=True \
quantization=fp8_full \
weight_quantization_calibration_method=fixed,-224,224 \
act_quantization_calibration_method=fixed,-224,224 \
wi_tile_fwd_batch_seq=512 \
wi_tile_fwd_embed_dim=4096 \
wi_tile_fwd_mlp_dim=1536 \
wi_tile_dlhs_batch_seq=512 \
wi_tile_dlhs_embed_dim=1536 \
wi_tile_dlhs_mlp_dim=4096 \
wi_tile_drhs_batch_seq=1024 \
wi_tile_drhs_embed_dim=1024 \
wi_tile_drhs_mlp_dim=1536 \
wo_tile_fwd_batch_seq=512 \
wo_tile_fwd_embed_dim=1536 \
wo_tile_fwd_mlp_dim=4096 \
wo_tile_dlhs_batch_seq=512 \
wo_tile_dlhs_embed_dim=4096 \
wo_tile_dlhs_mlp_dim=1536 \
wo_tile_drhs_batch_seq=512 \
wo_tile_drhs_embed_dim=768 \
wo_tile_drhs_mlp_dim=4096 \
dataset_type=synthetic \
dataset_path=gs://max-datasets-rogue \
base_output_directory=${BASE_OUTPUT_DIR} \
run_name=${WORKLOAD_NAME} "

xpk workload create \
  --cluster=$CLUSTER_NAME \
  --project=$PROJECT_ID \
  --zone=$ZONE \
  --priority=very-high \
  --max-restarts=0 \
  --device-type=tpu7x-4x8x8 \
  --num-slices=1 \
  --docker-image="${WORKLOAD_IMAGE}" \
  --enable-debug-logs \
  --workload="${WORKLOAD_NAME}" \
  --command="set -e && export ENABLE_PATHWAYS_PERSISTENCE='1' && \
export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
export JAX_PLATFORMS='tpu,cpu' && export ENABLE_PJRT_COMPATIBILITY='true' && \
python3 -m MaxText.train MaxText/configs/base.yml ${MAXTEXT_ARGS}"