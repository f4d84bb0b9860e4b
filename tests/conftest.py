"""Test-wide settings.

TensorFlow's Eigen kernels are the oracle in-process, so oneDNN is switched off before anything can
import TensorFlow; the oneDNN comparisons run in their own subprocess with it switched on.
"""

import os
import sys
from pathlib import Path

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

sys.path.insert(0, str(Path(__file__).parent))  # for `import refs`
