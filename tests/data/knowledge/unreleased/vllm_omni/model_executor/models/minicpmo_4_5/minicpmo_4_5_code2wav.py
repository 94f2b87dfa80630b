# Stand-in: Code2Wav option reads in the shape of post-0.30.0 sources.
import os

_MAX_ROWS = 2 * 8


class Code2Wav:
    def __init__(self, extra):
        self.tf32 = bool(extra.get("token2wav_allow_tf32", False))
        self.sizes = extra.get("hift_graph_exact_batch_sizes")
        self.rows = int(extra.get("whole_euler_pad_max_rows", _MAX_ROWS))
        self.device = extra.get("token2wav_s3tokenizer_device", os.environ.get("S3_DEVICE", "cuda"))
        self.chunk = int(extra["codec_chunk_frames"])
        self.micro_batch = int(extra.get("micro_batch_size", 1))
        self.hift = bool(extra.get("enable_hift_graph", False))
        self.hift_sizes = extra.get("hift_graph_capture_batch_sizes")
