# Sourced by the distributed device scripts (run_dist.sh, run_probe_fsdp.sh)
# before their own work: device_env.sh's setup (OUT made absolute, the GPU
# named, print_versions), then from bench/distributed, with the versions
# printed and the environment every multi-GPU job runs in.
. "$(dirname "$0")/../accuracy/device_env.sh"
cd ../distributed || exit 1
nvidia-smi -L
print_versions torchvision transformers
# NVLink multicast stays off (the device tool's KINDS.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# the parent forks the workers: it must not initialise CUDA, even to ask for it
export PYTORCH_NVML_BASED_CUDA_CHECK=1
