"""The serving benchmark protocol of the CUDA CAM++ write-up: sweeps, reports, A/B runs."""
