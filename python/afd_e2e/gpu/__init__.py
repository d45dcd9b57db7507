"""NVIDIA GPU probes through NVML (nvidia-ml-py). Everything here degrades to "no GPU" cleanly on CPU machines."""
